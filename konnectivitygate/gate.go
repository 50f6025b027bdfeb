package konnectivitygate

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httputil"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
)

// Config is what a Gate needs; every field is required.
type Config struct {
	// Server is konnectivity-server's agent port as host:port, on
	// loopback beside the gate (its --agent-bind-address=127.0.0.1).
	Server string
	// ServerTLS is how the gate dials it: the CA of the server's
	// certificate, and the gate's client certificate, the only one the
	// server's --cluster-ca-cert trusts.
	ServerTLS *TLSFiles
	// Log receives one line per stream let through or refused.
	Log *logrus.Entry
}

// Gate is the agents' side of the server: an http.Handler for HTTP/2 over
// mutual TLS (see Serve), where each request is one gRPC stream. A stream
// whose claims its client certificate names is proxied to the server;
// any other is answered with a gRPC error and never reaches it. Every
// stream is checked, not only a connection's first: an agent may open
// several on one connection.
type Gate struct {
	proxy *httputil.ReverseProxy
	log   *logrus.Entry
}

var _ http.Handler = (*Gate)(nil)

// New returns a Gate proxying to cfg.Server.
func New(cfg Config) (*Gate, error) {
	if cfg.Server == "" || cfg.ServerTLS == nil || cfg.Log == nil {
		return nil, errors.New("konnectivity gate: Server, ServerTLS and Log are required")
	}
	clientTLS, err := cfg.ServerTLS.client()
	if err != nil {
		return nil, err
	}
	g := &Gate{log: cfg.Log}
	// HTTP/2 only, as gRPC is: the transport keeps the request body
	// streaming upstream while the response streams back (full duplex),
	// and hands the response's trailers (grpc-status) to the proxy, which
	// sends them on.
	var h2 http.Protocols
	h2.SetHTTP2(true)
	transport := &http.Transport{TLSClientConfig: clientTLS, Protocols: &h2}
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = cfg.Server
			pr.Out.Host = ""
			if pr.Out.Body != nil {
				pr.Out.Body = interruptible(pr.Out.Body)
			}
		},
		Transport: transport,
		// Every message is passed on as it comes: a tunnel, not a page.
		FlushInterval: -1,
		ErrorHandler:  g.upstreamFailed,
		ErrorLog:      log.New(cfg.Log.WriterLevel(logrus.DebugLevel), "", 0),
	}
	return g, nil
}

// ServeHTTP checks one stream's claims against the client certificate and
// proxies it, or refuses it.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := g.log.WithFields(logrus.Fields{"remote": r.RemoteAddr, "agentID": r.Header.Get(AgentIDHeader), "method": r.URL.Path})
	// Serve asks for verified client certificates; a handler mounted
	// elsewhere must not let an unverified one through.
	if r.ProtoMajor != 2 || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		log.Warn("refused a stream without a verified client certificate")
		writeStatus(w, codes.Unauthenticated, "a client certificate of the agents' CA is required")
		return
	}
	cert := r.TLS.VerifiedChains[0][0]
	log = log.WithField("subject", cert.Subject.String())
	claims, err := ParseClaims(r.Header.Values(IdentifiersHeader))
	if err != nil {
		log.WithError(err).Warn("refused a stream with unreadable identifiers")
		writeStatus(w, codes.InvalidArgument, err.Error())
		return
	}
	if c, bad := Uncovered(cert, claims); bad {
		log.WithField("identifier", c.String()).Warn("refused an identifier the agent's certificate does not name")
		writeStatus(w, codes.PermissionDenied, fmt.Sprintf("identifier %s is not named by the agent's certificate %q", c, cert.Subject))
		return
	}
	log.WithField("identifiers", claims).Info("agent stream let through")
	g.proxy.ServeHTTP(w, r)
}

// upstreamFailed answers a stream the server could not be reached for
// (down, restarting) as gRPC does a connection refused, Unavailable, so
// that the agent dials again.
func (g *Gate) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	entry := g.log.WithError(err).WithField("remote", r.RemoteAddr)
	if errors.Is(err, context.Canceled) {
		entry.Debug("agent went away before the server answered")
	} else {
		entry.Warn("konnectivity-server unreachable")
	}
	writeStatus(w, codes.Unavailable, "konnectivity-server unreachable")
}

package konnectivitygate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/sirupsen/logrus"
)

// A connection that stays silent this long is pinged, and closed when the
// ping is not answered in time: an agent whose link died without a word
// leaves the server within about a minute and a quarter, its streams
// cancelled, instead of being sent traffic it cannot carry. Agents ping
// every 30s themselves (the chart's --keepalive-time), so a live one is
// never pinged.
const (
	agentPingAfter   = time.Minute
	agentPingTimeout = 15 * time.Second
)

// TLSFiles names the PEM files of one side of the gate's mutual TLS: its
// own certificate and key, and the CA that verifies the peer. They are read
// once, at New or Serve, as konnectivity-server reads its own: a rotation
// restarts the gate with the server.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

func (f *TLSFiles) load() (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load %s and %s: %w", f.CertFile, f.KeyFile, err)
	}
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return tls.Certificate{}, nil, fmt.Errorf("load CA %s: no PEM certificate", f.CAFile)
	}
	return cert, pool, nil
}

// client is the configuration for dialing the server.
func (f *TLSFiles) client() (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// server is the configuration agents are served with: each must present
// a client certificate that pool verifies.
func (f *TLSFiles) server() (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}, nil
}

// Serve accepts agents on l, a TCP listener, over HTTP/2 with mutual TLS
// (agents: the gate's serving certificate, and the CA of the agents'
// client certificates) until ctx ends. It then closes every connection:
// the agents' streams end and the agents dial again, as when the server
// itself restarts.
func (g *Gate) Serve(ctx context.Context, l net.Listener, agents *TLSFiles) error {
	tlsConfig, err := agents.server()
	if err != nil {
		return fmt.Errorf("konnectivity gate: agents' TLS: %w", err)
	}
	var h2 http.Protocols
	h2.SetHTTP2(true)
	srv := &http.Server{
		Handler:           g,
		TLSConfig:         tlsConfig,
		Protocols:         &h2,
		ReadHeaderTimeout: 10 * time.Second,
		HTTP2:             &http.HTTP2Config{SendPingTimeout: agentPingAfter, PingTimeout: agentPingTimeout},
		// Handshakes refused for a certificate of another CA land here,
		// and so do health probes that only open a TCP connection.
		ErrorLog: log.New(g.log.WriterLevel(logrus.DebugLevel), "", 0),
	}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if err := srv.ServeTLS(l, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("konnectivity gate: %w", err)
	}
	return nil
}

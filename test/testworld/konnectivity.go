package testworld

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Konnectivity is the world's apiserver-network-proxy: a proxy-server
// beside the host's apiserver, which sends all its traffic to nodes, pods
// and services (the "cluster" egress) through it, and agents that dial out
// to the server and carry that traffic on. One agent runs in the world's
// own network with the default-route identifier, for everything the host
// reaches directly (members in the world, push mode); each member behind
// NAT gets one in its site, identified by the site's address, so that
// traffic for an address of that site goes through its own agent (the
// server's destHost strategy).
//
// Agents authenticate with client certificates of a CA of the world's
// Konnectivity alone, which every pull-mode member holds, and dial
// flotilla-konnectivity-gate, not the server: the gate lets an agent claim
// only the identifiers its certificate names (a site's agent its site's
// address as an IP SAN, the world's agent the default-route URI SAN), and
// proxies what it lets through to the server's agent port, which listens
// on 127.0.0.1 and trusts only the gate's client certificate, of a CA of
// its own. A member that claims another's address is refused there and
// never reaches the server.
//
// The server's frontend, where traffic enters the tunnel, speaks HTTP
// CONNECT over mutual TLS (proxy-server --mode=http-connect; one mode per
// server) rather than gRPC over a Unix socket, because two host components
// need it: the host apiserver (its egress selector's HTTPConnect over TCP)
// and the host's metrics-server, which scrapes every virtual node's
// kubelet endpoint itself and, being a client-go program, takes an HTTPS
// proxy from HTTPS_PROXY. What the frontend allows:
//
//   - It listens on 127.0.0.1 of the world only: the sites have loopbacks
//     of their own and no route to the world's.
//   - It requires a client certificate of a CA of its own, which issues
//     exactly two: the host apiserver's and the host metrics-server's.
//     Neither the host CA, which signs every host user's client
//     certificate (the admin's included), nor the agents' CA, which every
//     pull-mode member holds, is trusted there.
//   - A holder of one of those two certificates can open a TCP connection
//     to any address an agent claims, and through the default route to
//     any address of the world: what the host apiserver alone could do
//     before. What it reaches still authenticates it: a virtual node's
//     kubelet endpoint checks every request against the host (client
//     certificates of the host CA, bearer tokens by TokenReview) and
//     authorizes it by SubjectAccessReview.
//   - Its serving certificate is issued by the host CA, naming 127.0.0.1:
//     metrics-server checks it against --kubelet-certificate-authority,
//     the host CA, which also issues the kubelet endpoints' certificates,
//     so metrics-server trusts no CA it did not trust before.
type Konnectivity struct {
	// ProxyURL is the frontend, https://127.0.0.1:<port>: the host
	// apiserver's egress and the host metrics-server's HTTPS_PROXY.
	ProxyURL string
	// AgentPort is the port agents dial, the gate's, on 0.0.0.0 of the
	// world: a site reaches it at its gateway.
	AgentPort int
	// CAFile is the CA of the gate's serving certificate toward agents
	// and of the agents' client certificates.
	CAFile string

	dir           string
	ca            *authority // agents' side
	gateCA        *authority // between the gate and the server
	frontendCA    *authority // clients of the frontend
	gateCert      string     // the gate's, toward agents
	gateKey       string
	serverCert    string // the server's, toward the gate
	serverKey     string
	gateClient    string // the gate's, toward the server
	gateClientKey string
	serverPort    int    // the server's agent port, on 127.0.0.1, where the gate dials
	frontendCert  string // toward the host apiserver and metrics-server
	frontendKey   string
	frontendPort  int
	adminPort     int
	healthPort    int
	egressConfig  string
	server        *Process
	gate          *Process
	agents        map[string]*konnectivityAgent
}

type konnectivityAgent struct {
	site       *Site
	identifier string
	healthPort int
	adminPort  int
	process    *Process
}

// egressSelectorConfig sends the host apiserver's cluster egress (nodes,
// pods, services) to the proxy-server's frontend: HTTP CONNECT over mutual
// TLS.
const egressSelectorConfig = `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: %s
        tlsConfig:
          caBundle: %s
          clientCert: %s
          clientKey: %s
`

// newKonnectivity prepares the certificates of the gate and the server
// toward agents and toward each other in dir, and returns the path the
// host apiserver's egress selector configuration will have;
// prepareFrontend writes it once the host's CA exists. Agents in sites
// dial the gate at AdvertiseIP, through their gateway, so its certificate
// needs no gateway address.
func newKonnectivity(dir string, ports *portAllocator) (*Konnectivity, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	k := &Konnectivity{dir: dir, egressConfig: filepath.Join(dir, "egress-selector.yaml"), agents: map[string]*konnectivityAgent{}}
	p, err := ports.allocateN(5)
	if err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	k.AgentPort, k.adminPort, k.healthPort, k.frontendPort, k.serverPort = p[0], p[1], p[2], p[3], p[4]
	k.ProxyURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(k.frontendPort))
	if k.ca, err = newAuthority(dir, "ca", "testworld-konnectivity-ca"); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	k.CAFile = k.ca.CertFile
	if k.gateCert, k.gateKey, err = k.ca.issueFiles(dir, "gate", certSpec{
		commonName: "flotilla-konnectivity-gate", dnsNames: []string{"localhost"},
		ips:    []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(AdvertiseIP)},
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	if k.gateCA, err = newAuthority(dir, "gate-ca", "testworld-konnectivity-gate-ca"); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	if k.serverCert, k.serverKey, err = k.gateCA.issueFiles(dir, "server", certSpec{
		commonName: "konnectivity-server", ips: []net.IP{net.ParseIP("127.0.0.1")},
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	if k.gateClient, k.gateClientKey, err = k.gateCA.issueFiles(dir, "gate-client", certSpec{
		commonName: "flotilla-konnectivity-gate", usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	if k.frontendCA, err = newAuthority(dir, "frontend-ca", "testworld-konnectivity-frontend-ca"); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	return k, k.egressConfig, nil
}

// prepareFrontend issues the frontend's serving certificate from the host
// CA and the host apiserver's client certificate from the frontend's CA,
// and writes the apiserver's egress selector configuration.
func (k *Konnectivity) prepareFrontend(host *Cluster) error {
	var err error
	if k.frontendCert, k.frontendKey, err = host.pki.ca.issueFiles(k.dir, "frontend", certSpec{
		commonName: "konnectivity-server", ips: []net.IP{net.ParseIP("127.0.0.1")},
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return fmt.Errorf("konnectivity frontend: %w", err)
	}
	cert, key, err := k.frontendClient("kube-apiserver")
	if err != nil {
		return err
	}
	config := fmt.Appendf(nil, egressSelectorConfig, k.ProxyURL, host.CAFile, cert, key)
	if err := os.WriteFile(k.egressConfig, config, 0o644); err != nil {
		return fmt.Errorf("konnectivity: %w", err)
	}
	return nil
}

// frontendClient issues a client certificate of the frontend's CA for
// client (kube-apiserver, metrics-server) and returns its files. It names
// no user of any cluster: only the frontend trusts its CA.
func (k *Konnectivity) frontendClient(client string) (certFile, keyFile string, err error) {
	certFile, keyFile, err = k.frontendCA.issueFiles(k.dir, "frontend-client-"+client, certSpec{
		commonName: "konnectivity-client-" + client, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return "", "", fmt.Errorf("konnectivity frontend client certificate for %s: %w", client, err)
	}
	return certFile, keyFile, nil
}

// tunneled returns the command line that runs metrics-server (path with
// args) with its kubelet scrapes going through the frontend: the
// frontend's client certificate as its kubelet client certificate and the
// frontend as its HTTPS proxy. env(1) puts the proxy in its environment
// and execs it, so the process is metrics-server's own.
func (k *Konnectivity) tunneled(path string, args []string) (string, []string, error) {
	cert, key, err := k.frontendClient(metricsServerName)
	if err != nil {
		return "", nil, err
	}
	env, err := exec.LookPath("env")
	if err != nil {
		return "", nil, fmt.Errorf("konnectivity: %w", err)
	}
	return env, append([]string{
		"HTTPS_PROXY=" + k.ProxyURL,
		// Its apiserver, at 127.0.0.1, is reached directly: Go never
		// proxies a loopback address, and NO_PROXY says so. A real
		// installation names its apiserver's address (the kubernetes
		// Service's) here.
		"NO_PROXY=127.0.0.1,localhost",
		path,
		"--kubelet-client-certificate=" + cert,
		"--kubelet-client-key=" + key,
	}, args...), nil
}

// startServer starts the proxy-server in the world.
func (k *Konnectivity) startServer(w *World) error {
	var err error
	k.server, err = w.StartProcess("konnectivity-server", w.bin.KonnectivityServer,
		"--mode=http-connect",
		"--server-bind-address=127.0.0.1",
		"--server-port="+strconv.Itoa(k.frontendPort),
		"--server-cert="+k.frontendCert,
		"--server-key="+k.frontendKey,
		// Without it the frontend asks for no client certificate at all.
		"--server-ca-cert="+k.frontendCA.CertFile,
		// Agents reach the server only through the gate: it listens
		// on loopback and trusts the gate's client certificate alone.
		"--agent-bind-address=127.0.0.1",
		"--agent-port="+strconv.Itoa(k.serverPort),
		"--admin-port="+strconv.Itoa(k.adminPort),
		"--health-port="+strconv.Itoa(k.healthPort),
		"--health-bind-address=127.0.0.1",
		"--cluster-cert="+k.serverCert,
		"--cluster-key="+k.serverKey,
		"--cluster-ca-cert="+k.gateCA.CertFile,
		// An address one agent claims goes to it; anything else to the
		// agent of the world's own network.
		"--proxy-strategies=destHost,defaultRoute",
	)
	return err
}

// startGate builds flotilla-konnectivity-gate and starts it in front of
// the server: agents dial it at AgentPort, on every address of the world.
func (k *Konnectivity) startGate(ctx context.Context, w *World) error {
	bin, err := BuildPackage(ctx, "./cmd/"+KonnectivityGateCommand, filepath.Join(k.dir, KonnectivityGateCommand))
	if err != nil {
		return fmt.Errorf("konnectivity gate: %w", err)
	}
	k.gate, err = w.StartProcess("konnectivity-gate", bin,
		"--listen-address=:"+strconv.Itoa(k.AgentPort),
		"--tls-cert-file="+k.gateCert,
		"--tls-private-key-file="+k.gateKey,
		"--agent-ca-file="+k.ca.CertFile,
		"--server-address="+net.JoinHostPort("127.0.0.1", strconv.Itoa(k.serverPort)),
		"--server-client-cert-file="+k.gateClient,
		"--server-client-key-file="+k.gateClientKey,
		"--server-ca-file="+k.gateCA.CertFile,
		"--log-level=debug",
	)
	return err
}

// StartAgent starts an agent: in site s, identified by its address, or,
// for s nil, in the world, as its default route. name names its process
// and log. A name already running is stopped first.
func (k *Konnectivity) StartAgent(w *World, name string, s *Site) error {
	identifiers := "default-route=true"
	if s != nil {
		identifiers = "ipv4=" + s.Addr
	}
	return k.StartAgentAs(w, name, s, identifiers)
}

// StartAgentAs starts an agent in site s (the world for nil) that tells
// the server it is identifiers (URL-encoded, as proxy-agent takes them).
// Its certificate names what the agent of s may claim (agentCertSpec),
// whatever it claims: a forger is an agent of its own site claiming
// another's address.
func (k *Konnectivity) StartAgentAs(w *World, name string, s *Site, identifiers string) error {
	if old := k.agents[name]; old != nil && old.process != nil {
		_ = old.process.Stop()
	}
	a := &konnectivityAgent{site: s, identifier: identifiers}
	// A site reaches AdvertiseIP through its gateway, like any address
	// of the world's.
	host := "127.0.0.1"
	if s != nil {
		host = AdvertiseIP
	}
	p, err := w.ports.allocateN(2)
	if err != nil {
		return fmt.Errorf("konnectivity agent %s: %w", name, err)
	}
	a.healthPort, a.adminPort = p[0], p[1]
	addr := ""
	if s != nil {
		addr = s.Addr
	}
	cert, key, err := k.IssueAgentCert(name, addr)
	if err != nil {
		return err
	}
	a.process, err = w.StartSiteProcess(s, name, w.bin.KonnectivityAgent,
		"--proxy-server-host="+host,
		"--proxy-server-port="+strconv.Itoa(k.AgentPort),
		"--ca-cert="+k.ca.CertFile,
		"--agent-cert="+cert,
		"--agent-key="+key,
		"--agent-identifiers="+a.identifier,
		"--health-server-host=127.0.0.1",
		"--health-server-port="+strconv.Itoa(a.healthPort),
		"--admin-server-port="+strconv.Itoa(a.adminPort),
		// Back within a second of the server's return.
		"--sync-interval=200ms",
		"--sync-interval-cap=1s",
		"--probe-interval=200ms",
		// A link that died silently is noticed by the next ping (the
		// chart's default; the server refuses pings more often).
		"--keepalive-time=30s",
	)
	if err != nil {
		return fmt.Errorf("konnectivity agent %s: %w", name, err)
	}
	// The agent drains on a first SIGTERM and stops on a second.
	a.process.termAgain = true
	k.agents[name] = a
	return nil
}

// Agent returns the named agent's process, or nil.
func (k *Konnectivity) Agent(name string) *Process {
	if a := k.agents[name]; a != nil {
		return a.process
	}
	return nil
}

// Server returns the proxy-server's process.
func (k *Konnectivity) Server() *Process { return k.server }

// Gate returns the process of flotilla-konnectivity-gate, in front of the
// server's agent port. It logs each stream it refuses, naming the
// identifier and the certificate.
func (k *Konnectivity) Gate() *Process { return k.gate }

// RestartServer starts the proxy-server again after it was stopped.
func (k *Konnectivity) RestartServer(w *World) error {
	if k.server != nil {
		if err := k.server.Stop(); err != nil {
			return err
		}
	}
	return k.startServer(w)
}

// WaitAgentConnected waits until the named agent reports itself ready:
// connected to the server.
func (k *Konnectivity) WaitAgentConnected(ctx context.Context, name string) error {
	a := k.agents[name]
	if a == nil {
		return fmt.Errorf("no konnectivity agent %s", name)
	}
	transport := &http.Transport{}
	if a.site != nil {
		transport.DialContext = a.site.DialContext
	}
	client := &http.Client{Transport: transport, Timeout: 2 * time.Second}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(a.healthPort)), Path: "/readyz"}
	var last string
	for {
		if exited, err := a.process.Exited(); exited {
			return fmt.Errorf("konnectivity agent %s exited: %v", name, err)
		}
		resp, err := client.Get(u.String())
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("konnectivity agent %s not connected: %w (last: %s)", name, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

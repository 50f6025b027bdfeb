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
// Agents authenticate to the server with client certificates of a CA of
// the world's Konnectivity alone.
type Konnectivity struct {
	// Socket is the server's Unix socket, which the host apiserver dials.
	Socket string
	// AgentPort is the port agents dial, on 0.0.0.0 of the world: a site
	// reaches it at its gateway.
	AgentPort int
	// CAFile is the CA of the server's serving certificate and of the
	// agents' client certificates.
	CAFile string

	dir        string
	ca         *authority
	serverCert string
	serverKey  string
	adminPort  int
	healthPort int
	server     *Process
	agents     map[string]*konnectivityAgent
}

type konnectivityAgent struct {
	site       *Site
	identifier string
	healthPort int
	adminPort  int
	process    *Process
}

// egressSelectorConfig sends the host apiserver's cluster egress (nodes,
// pods, services) to the proxy-server's socket over gRPC.
const egressSelectorConfig = `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: GRPC
    transport:
      uds:
        udsName: %s
`

// newKonnectivity prepares the server's certificates and the host
// apiserver's egress selector configuration in dir, returning the
// configuration's path. Agents in sites dial the server at AdvertiseIP,
// through their gateway, so its certificate needs no gateway address.
func newKonnectivity(dir string, ports *portAllocator) (*Konnectivity, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	k := &Konnectivity{dir: dir, Socket: filepath.Join(dir, "konnectivity-server.sock"), agents: map[string]*konnectivityAgent{}}
	p, err := ports.allocateN(3)
	if err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	k.AgentPort, k.adminPort, k.healthPort = p[0], p[1], p[2]
	if k.ca, err = newAuthority(dir, "ca", "testworld-konnectivity-ca"); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	k.CAFile = k.ca.CertFile
	if k.serverCert, k.serverKey, err = k.ca.issueFiles(dir, "server", certSpec{
		commonName: "konnectivity-server", dnsNames: []string{"localhost"},
		ips:    []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(AdvertiseIP)},
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	config := filepath.Join(dir, "egress-selector.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, egressSelectorConfig, k.Socket), 0o644); err != nil {
		return nil, "", fmt.Errorf("konnectivity: %w", err)
	}
	return k, config, nil
}

// startServer starts the proxy-server in the world.
func (k *Konnectivity) startServer(w *World) error {
	var err error
	k.server, err = w.StartProcess("konnectivity-server", w.bin.KonnectivityServer,
		"--mode=grpc",
		"--uds-name="+k.Socket,
		"--delete-existing-uds-file",
		"--server-port=0",
		"--agent-port="+strconv.Itoa(k.AgentPort),
		"--admin-port="+strconv.Itoa(k.adminPort),
		"--health-port="+strconv.Itoa(k.healthPort),
		"--health-bind-address=127.0.0.1",
		"--cluster-cert="+k.serverCert,
		"--cluster-key="+k.serverKey,
		"--cluster-ca-cert="+k.ca.CertFile,
		// An address one agent claims goes to it; anything else to the
		// agent of the world's own network.
		"--proxy-strategies=destHost,defaultRoute",
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
// the server it is identifiers (URL-encoded, as proxy-agent takes them):
// what any holder of an agent certificate can claim, a forger included.
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
	cert, key, err := k.ca.issueFiles(k.dir, "agent-"+name, certSpec{
		commonName: "konnectivity-agent-" + name, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("konnectivity agent %s: %w", name, err)
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

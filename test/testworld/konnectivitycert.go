package testworld

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/url"

	"flotilla.io/flotilla/internal/wellknown"
)

// IssueAgentCert issues a client certificate for a Konnectivity agent
// named name from the CA the gate trusts for agents (CAFile), as an
// operator would for an agent packaged elsewhere (a chart's, say), and
// returns its files. The certificate names what the agent may claim: addr
// as an IP SAN (ipv4= or ipv6=), or, for addr empty, the default route
// (wellknown.KonnectivityDefaultRouteURI).
func (k *Konnectivity) IssueAgentCert(name, addr string) (certFile, keyFile string, err error) {
	spec := certSpec{commonName: "konnectivity-agent-" + name, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if addr != "" {
		ip := net.ParseIP(addr)
		if ip == nil {
			return "", "", fmt.Errorf("konnectivity agent certificate %s: %q is no IP address", name, addr)
		}
		spec.ips = []net.IP{ip}
	} else {
		u, err := url.Parse(wellknown.KonnectivityDefaultRouteURI)
		if err != nil {
			return "", "", fmt.Errorf("konnectivity agent certificate %s: %w", name, err)
		}
		spec.uris = []*url.URL{u}
	}
	certFile, keyFile, err = k.ca.issueFiles(k.dir, "agent-"+name, spec)
	if err != nil {
		return "", "", fmt.Errorf("konnectivity agent certificate %s: %w", name, err)
	}
	return certFile, keyFile, nil
}

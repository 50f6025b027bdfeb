package testworld

import (
	"crypto/x509"
	"fmt"
)

// IssueAgentCert issues a client certificate for a Konnectivity agent
// named name from the CA the server trusts for agents (CAFile), as an
// operator would for an agent packaged elsewhere (a chart's, say), and
// returns its files.
func (k *Konnectivity) IssueAgentCert(name string) (certFile, keyFile string, err error) {
	certFile, keyFile, err = k.ca.issueFiles(k.dir, "agent-"+name, certSpec{
		commonName: "konnectivity-agent-" + name, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return "", "", fmt.Errorf("konnectivity agent certificate %s: %w", name, err)
	}
	return certFile, keyFile, nil
}

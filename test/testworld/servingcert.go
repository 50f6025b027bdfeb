package testworld

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// IssueServingCert issues a serving certificate from the cluster CA for a
// server of the world (a virtual node's kubelet endpoint, say) reachable at
// ips and under the DNS name name, and writes it with its key to
// Dir/pki/serving/<name>.crt and .key. The cluster's apiserver verifies
// kubelet endpoints against this CA (--kubelet-certificate-authority), so a
// virtual node needs such a certificate for logs, exec and metrics to work.
// Issuing again for the same name replaces the files.
func (c *Cluster) IssueServingCert(name string, ips []net.IP) (certFile, keyFile string, err error) {
	if name == "" {
		return "", "", fmt.Errorf("serving certificate in %s: empty name", c.Name)
	}
	dir := filepath.Join(c.Dir, "pki", "serving")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("serving certificate for %s in %s: %w", name, c.Name, err)
	}
	certFile, keyFile, err = c.pki.ca.issueFiles(dir, safeFileName(name), certSpec{
		commonName: name,
		dnsNames:   []string{name},
		ips:        ips,
		usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return "", "", fmt.Errorf("serving certificate for %s in %s: %w", name, c.Name, err)
	}
	return certFile, keyFile, nil
}

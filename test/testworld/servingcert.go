package testworld

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// IssueServingCert issues a serving certificate from the cluster CA for a
// server of the world (a virtual node's kubelet endpoint, say) reachable at
// ips and under the DNS name name, and writes it with its key to
// Dir/pki/serving/<name>-<digest>.crt and .key. The cluster's apiserver
// verifies kubelet endpoints against this CA (--kubelet-certificate-authority),
// so a virtual node needs such a certificate for logs, exec and metrics to
// work. Each issue writes a pair of its own that nothing rewrites: a server
// started with an earlier pair for the same name (the other half of an
// active/standby pair, say) never reads one issue's certificate with
// another's key.
func (c *Cluster) IssueServingCert(name string, ips []net.IP) (certFile, keyFile string, err error) {
	if name == "" {
		return "", "", fmt.Errorf("serving certificate in %s: empty name", c.Name)
	}
	dir := filepath.Join(c.Dir, "pki", "serving")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("serving certificate for %s in %s: %w", name, c.Name, err)
	}
	certPEM, keyPEM, err := c.pki.ca.issue(certSpec{
		commonName: name,
		dnsNames:   []string{name},
		ips:        ips,
		usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return "", "", fmt.Errorf("serving certificate for %s in %s: %w", name, c.Name, err)
	}
	digest := sha256.Sum256(certPEM)
	base := safeFileName(name) + "-" + hex.EncodeToString(digest[:])[:12]
	if certFile, keyFile, err = writeCertAndKey(dir, base, certPEM, keyPEM); err != nil {
		return "", "", fmt.Errorf("serving certificate for %s in %s: %w", name, c.Name, err)
	}
	return certFile, keyFile, nil
}

package konnectivitygate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testCA is a certificate authority of a test, its files in a temporary
// directory.
type testCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	ca := &testCA{dir: t.TempDir()}
	tmpl := &x509.Certificate{
		Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign,
	}
	ca.cert, ca.key, ca.file, _ = ca.sign(t, name, tmpl, nil)
	return ca
}

// leaf is what a certificate issued by a testCA names.
type leaf struct {
	ips    []string
	dns    []string
	uris   []string
	usages []x509.ExtKeyUsage
}

// issue writes a certificate for name and its key, and returns their
// files.
func (ca *testCA) issue(t *testing.T, name string, l leaf) TLSFiles {
	t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: name}, DNSNames: l.dns, ExtKeyUsage: l.usages, KeyUsage: x509.KeyUsageDigitalSignature}
	for _, ip := range l.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	for _, u := range l.uris {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	_, _, certFile, keyFile := ca.sign(t, name, tmpl, ca)
	return TLSFiles{CertFile: certFile, KeyFile: keyFile, CAFile: ca.file}
}

func (ca *testCA) sign(t *testing.T, name string, tmpl *x509.Certificate, parent *testCA) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key, certFile, keyFile
}

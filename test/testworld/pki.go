package testworld

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certValidity is long enough for any test run or demo session, and short
// enough that a leaked key is worthless soon.
const certValidity = 365 * 24 * time.Hour

// authority is a certificate authority whose certificate and key are on disk.
type authority struct {
	cert     *x509.Certificate
	key      crypto.Signer
	certPEM  []byte
	CertFile string
	KeyFile  string
}

// certSpec says what a certificate issued by an authority is for.
type certSpec struct {
	commonName   string
	organization []string // Kubernetes reads a client certificate's O as groups
	dnsNames     []string
	ips          []net.IP
	uris         []*url.URL
	usages       []x509.ExtKeyUsage
}

// newKey generates a P-256 key: ECDSA keys take microseconds to generate
// where RSA keys take tens of milliseconds, and every Kubernetes component
// accepts them, service-account signing included.
func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// newAuthority creates a self-signed CA and writes it to dir/base.crt and
// dir/base.key.
func newAuthority(dir, base, commonName string) (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("generate key for CA %s: %w", commonName, err)
	}
	caCert, err := cert.NewSelfSignedCACert(cert.Config{CommonName: commonName}, key)
	if err != nil {
		return nil, fmt.Errorf("create CA %s: %w", commonName, err)
	}
	certPEM, err := cert.EncodeCertificates(caCert)
	if err != nil {
		return nil, fmt.Errorf("encode CA %s: %w", commonName, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, fmt.Errorf("encode key of CA %s: %w", commonName, err)
	}
	a := &authority{cert: caCert, key: key, certPEM: certPEM}
	a.CertFile, a.KeyFile, err = writeCertAndKey(dir, base, certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// issue signs a new key for spec and returns the certificate and key as PEM.
func (a *authority) issue(spec certSpec) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, fmt.Errorf("generate key for %s: %w", spec.commonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).SetInt64(math.MaxInt64))
	if err != nil {
		return nil, nil, fmt.Errorf("serial for %s: %w", spec.commonName, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.commonName, Organization: spec.organization},
		DNSNames:     spec.dnsNames,
		IPAddresses:  spec.ips,
		URIs:         spec.uris,
		// Backdated so that a certificate is valid the moment it exists,
		// whatever the rounding of the components' clocks.
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(certValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: spec.usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate for %s: %w", spec.commonName, err)
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key for %s: %w", spec.commonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: cert.CertificateBlockType, Bytes: der}), keyPEM, nil
}

// issueFiles is issue writing the result to dir/base.crt and dir/base.key.
func (a *authority) issueFiles(dir, base string, spec certSpec) (certFile, keyFile string, err error) {
	certPEM, keyPEM, err := a.issue(spec)
	if err != nil {
		return "", "", err
	}
	return writeCertAndKey(dir, base, certPEM, keyPEM)
}

func writeCertAndKey(dir, base string, certPEM, keyPEM []byte) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	if err := cert.WriteCert(certFile, certPEM); err != nil {
		return "", "", fmt.Errorf("write %s: %w", certFile, err)
	}
	if err := keyutil.WriteKey(keyFile, keyPEM); err != nil {
		return "", "", fmt.Errorf("write %s: %w", keyFile, err)
	}
	return certFile, keyFile, nil
}

// clusterPKI is every certificate and key one cluster's components use.
type clusterPKI struct {
	ca           *authority // signs serving and client certificates, and CSRs
	frontProxyCA *authority // signs the aggregator's client certificate only

	apiserverCert, apiserverKey         string
	serviceAccountKey, serviceAccountPK string // private key, public key
	frontProxyCert, frontProxyKey       string
	kubeletClientCert, kubeletClientKey string // apiserver -> kubelet (kwok)
	kwokCert, kwokKey                   string // kwok's kubelet-like server
}

// Names of the identities this package gives the apiserver toward kubelets
// and the aggregator toward extension apiservers.
const (
	kubeletClientUser   = "kube-apiserver-kubelet-client"
	frontProxyClientCN  = "front-proxy-client"
	kubeletAPIAdminCRB  = "testworld:kube-apiserver-kubelet-api-admin"
	kubeletAPIAdminRole = "system:kubelet-api-admin"
)

// newClusterPKI creates a cluster's PKI in dir. firstServiceIP is the
// ClusterIP of the kubernetes Service, which in-cluster clients dial;
// advertise is the address the cluster's components advertise, and extra
// are further addresses the apiserver is reached at (the host's, from the
// sites behind NAT).
func newClusterPKI(dir, clusterName string, firstServiceIP, advertise net.IP, extra ...net.IP) (*clusterPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create PKI dir: %w", err)
	}
	p := &clusterPKI{}
	var err error
	if p.ca, err = newAuthority(dir, "ca", "testworld-"+clusterName+"-ca"); err != nil {
		return nil, err
	}
	if p.frontProxyCA, err = newAuthority(dir, "front-proxy-ca", "testworld-"+clusterName+"-front-proxy-ca"); err != nil {
		return nil, err
	}
	serverAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if p.apiserverCert, p.apiserverKey, err = p.ca.issueFiles(dir, "apiserver", certSpec{
		commonName: "kube-apiserver",
		dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		ips:    append([]net.IP{net.ParseIP("127.0.0.1"), advertise, firstServiceIP}, extra...),
		usages: serverAuth,
	}); err != nil {
		return nil, err
	}
	if p.frontProxyCert, p.frontProxyKey, err = p.frontProxyCA.issueFiles(dir, "front-proxy-client", certSpec{
		commonName: frontProxyClientCN, usages: clientAuth,
	}); err != nil {
		return nil, err
	}
	if p.kubeletClientCert, p.kubeletClientKey, err = p.ca.issueFiles(dir, "apiserver-kubelet-client", certSpec{
		commonName: kubeletClientUser, usages: clientAuth,
	}); err != nil {
		return nil, err
	}
	if p.kwokCert, p.kwokKey, err = p.ca.issueFiles(dir, "kwok-serving", certSpec{
		commonName: "kwok", dnsNames: []string{"localhost"},
		ips: []net.IP{net.ParseIP("127.0.0.1"), advertise}, usages: serverAuth,
	}); err != nil {
		return nil, err
	}
	if p.serviceAccountKey, p.serviceAccountPK, err = writeServiceAccountKey(dir); err != nil {
		return nil, err
	}
	return p, nil
}

// writeServiceAccountKey writes the key the apiserver signs service account
// tokens with and the controller-manager signs legacy tokens with, and its
// public half, which the apiserver verifies tokens with.
func writeServiceAccountKey(dir string) (keyFile, pubFile string, err error) {
	key, err := newKey()
	if err != nil {
		return "", "", fmt.Errorf("generate service account key: %w", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return "", "", fmt.Errorf("encode service account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", fmt.Errorf("encode service account public key: %w", err)
	}
	keyFile, pubFile = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := keyutil.WriteKey(keyFile, keyPEM); err != nil {
		return "", "", fmt.Errorf("write %s: %w", keyFile, err)
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return "", "", fmt.Errorf("write %s: %w", pubFile, err)
	}
	return keyFile, pubFile, nil
}

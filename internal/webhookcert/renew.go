package webhookcert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Keys of the Secret.
const (
	// CABundleKey holds every CA certificate clients should trust: the
	// signing CA, the next one while it waits to take over, and former ones
	// until they expire. It is what the webhook configurations' caBundle
	// gets.
	CABundleKey = "ca.crt"
	// SignerCertKey and SignerKeyKey hold the CA that signs the serving
	// certificate.
	SignerCertKey = "signer.crt"
	SignerKeyKey  = "signer.key"
	// NextCertKey and NextKeyKey hold the CA that will sign next, already
	// in the bundle.
	NextCertKey = "next.crt"
	NextKeyKey  = "next.key"
	// ServingCertKey and ServingKeyKey hold the serving certificate, as in
	// a kubernetes.io/tls Secret.
	ServingCertKey = "tls.crt"
	ServingKeyKey  = "tls.key"
)

// skew is how far back a new certificate's NotBefore is set, so that an
// apiserver whose clock is a little behind accepts it at once.
const skew = 5 * time.Minute

// Want is what the certificates must be.
type Want struct {
	// DNSNames and IPs are the serving certificate's subject alternative
	// names.
	DNSNames []string
	IPs      []net.IP
	// CAValidity and ServingValidity are the lifetimes of new
	// certificates. A serving certificate never outlives its CA.
	CAValidity, ServingValidity time.Duration
}

// Renew returns the Secret data that should hold at now given the current
// data (nil or partial when there is none yet), and why it changed; no
// reasons means data is kept as it is. The rules:
//
//   - A CA lives Want.CAValidity. At 2/3 of its life a next CA is made and
//     added to the bundle; it starts signing once it has been in the bundle
//     for 1/6 of the signer's life (or the signer expired), so clients have
//     long had it when the first certificate it signed is served. A former
//     CA stays in the bundle until it expires.
//   - The serving certificate is renewed at 2/3 of its life, when it is not
//     signed by the signing CA, or when its names differ from Want.
//   - Whatever is missing or cannot be parsed is made anew.
func Renew(now time.Time, data map[string][]byte, want Want) (map[string][]byte, []string, error) {
	var reasons []string
	next, err := parsePair(data[NextCertKey], data[NextKeyKey])
	if !usableCA(next, err, now) {
		if len(data[NextCertKey]) > 0 {
			reasons = append(reasons, "dropped an unusable next CA")
		}
		next = nil
	}
	signer, err := parsePair(data[SignerCertKey], data[SignerKeyKey])
	switch {
	case usableCA(signer, err, now):
	case next != nil:
		// Down past the switch: the next CA has been trusted all along.
		signer, next = next, nil
		reasons = append(reasons, "signing CA expired: next CA became the signing CA")
	default:
		if signer, err = newCA(now, want.CAValidity); err != nil {
			return nil, nil, err
		}
		// Nothing of the old set can be relied on: start over.
		data = nil
		reasons = append(reasons, "no valid signing CA")
	}
	if next == nil && !now.Before(renewAt(signer.cert)) {
		if next, err = newCA(now, want.CAValidity); err != nil {
			return nil, nil, err
		}
		reasons = append(reasons, "signing CA at 2/3 of its life: next CA added to the bundle")
	}
	if next != nil && !now.Before(switchAt(signer.cert, next.cert)) {
		signer, next = next, nil
		reasons = append(reasons, "next CA became the signing CA")
	}

	// The bundle: unexpired CAs from before, plus the signer and the next.
	old, _ := cert.ParseCertsPEM(data[CABundleKey])
	var bundle []*x509.Certificate
	for _, c := range append([]*x509.Certificate{signer.cert}, old...) {
		if c.IsCA && now.Before(c.NotAfter) && !slices.ContainsFunc(bundle, func(b *x509.Certificate) bool { return b.Equal(c) }) {
			bundle = append(bundle, c)
		}
	}
	if next != nil && !slices.ContainsFunc(bundle, func(b *x509.Certificate) bool { return b.Equal(next.cert) }) {
		bundle = append(bundle, next.cert)
	}
	bundlePEM, err := cert.EncodeCertificates(bundle...)
	if err != nil {
		return nil, nil, err
	}
	if len(reasons) == 0 && !bytes.Equal(bundlePEM, data[CABundleKey]) {
		reasons = append(reasons, "CA bundle updated")
	}

	serving, err := parsePair(data[ServingCertKey], data[ServingKeyKey])
	if why := servingProblem(now, serving, err, signer.cert, want); why != "" {
		if serving, err = newServing(now, signer, want); err != nil {
			return nil, nil, err
		}
		reasons = append(reasons, why)
	}
	if len(reasons) == 0 {
		return data, nil, nil
	}
	out := map[string][]byte{
		CABundleKey:    bundlePEM,
		SignerCertKey:  signer.certPEM,
		SignerKeyKey:   signer.keyPEM,
		ServingCertKey: serving.certPEM,
		ServingKeyKey:  serving.keyPEM,
	}
	if next != nil {
		out[NextCertKey], out[NextKeyKey] = next.certPEM, next.keyPEM
	}
	return out, reasons, nil
}

// NextCheck returns the time after now at which Renew would change data
// that it leaves unchanged at now: the earliest renewal point of the
// certificates in it, at most a day ahead.
func NextCheck(now time.Time, data map[string][]byte) time.Time {
	parse := func(k string) *x509.Certificate {
		if cs, err := cert.ParseCertsPEM(data[k]); err == nil {
			return cs[0]
		}
		return nil
	}
	var points []time.Time
	signer, next := parse(SignerCertKey), parse(NextCertKey)
	if signer != nil {
		points = append(points, renewAt(signer), signer.NotAfter)
		if next != nil {
			points = append(points, switchAt(signer, next))
		}
	}
	if serving := parse(ServingCertKey); serving != nil {
		points = append(points, renewAt(serving), serving.NotAfter)
	}
	at := now.Add(24 * time.Hour)
	for _, t := range points {
		if t.After(now) && t.Before(at) {
			at = t
		}
	}
	return at
}

func servingProblem(now time.Time, serving *pair, err error, signer *x509.Certificate, want Want) string {
	switch {
	case err != nil:
		return "no valid serving certificate"
	case !valid(serving.cert, now):
		return "serving certificate expired or not yet valid"
	case serving.cert.CheckSignatureFrom(signer) != nil:
		return "serving certificate not signed by the signing CA"
	case !sameNames(serving.cert, want):
		return "serving certificate names changed"
	case !now.Before(renewAt(serving.cert)):
		return "serving certificate at 2/3 of its life"
	}
	return ""
}

func sameNames(c *x509.Certificate, want Want) bool {
	dns := slices.Sorted(slices.Values(want.DNSNames))
	got := slices.Sorted(slices.Values(c.DNSNames))
	if !slices.Equal(dns, got) || len(c.IPAddresses) != len(want.IPs) {
		return false
	}
	for _, ip := range want.IPs {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func usableCA(p *pair, err error, now time.Time) bool {
	return err == nil && p.cert.IsCA && valid(p.cert, now)
}

func lifetime(c *x509.Certificate) time.Duration { return c.NotAfter.Sub(c.NotBefore) }

// switchAt is when next, made at 2/3 of signer's life, starts signing:
// after 1/6 of signer's life in the bundle.
func switchAt(signer, next *x509.Certificate) time.Time {
	return next.NotBefore.Add(skew + lifetime(signer)/6)
}

// renewAt is 2/3 into c's life.
func renewAt(c *x509.Certificate) time.Time { return c.NotBefore.Add(lifetime(c) * 2 / 3) }

func valid(c *x509.Certificate, now time.Time) bool {
	return !now.Before(c.NotBefore) && now.Before(c.NotAfter)
}

// pair is a certificate with its key, parsed and as PEM.
type pair struct {
	cert            *x509.Certificate
	key             crypto.Signer
	certPEM, keyPEM []byte
}

func parsePair(certPEM, keyPEM []byte) (*pair, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, errors.New("missing")
	}
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, err
	}
	k, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	key, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("key cannot sign")
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(certs[0].PublicKey) {
		return nil, errors.New("key does not match the certificate")
	}
	return &pair{cert: certs[0], key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

func newCA(now time.Time, validity time.Duration) (*pair, error) {
	return issue(now, validity, &x509.Certificate{
		Subject:               pkix.Name{CommonName: fmt.Sprintf("flotilla-policy-webhook-ca@%d", now.Unix())},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
}

func newServing(now time.Time, ca *pair, want Want) (*pair, error) {
	validity := want.ServingValidity
	if left := ca.cert.NotAfter.Sub(now.Add(-skew)); left < validity {
		validity = left
	}
	cn := "flotilla-policy-webhook"
	if len(want.DNSNames) > 0 {
		cn = want.DNSNames[0]
	}
	return issue(now, validity, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    want.DNSNames,
		IPAddresses: want.IPs,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca)
}

// issue signs tmpl with a new ECDSA key, by ca or by itself, valid from
// now-skew for validity.
func issue(now time.Time, validity time.Duration, tmpl *x509.Certificate, ca *pair) (*pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-skew).UTC()
	tmpl.NotAfter = tmpl.NotBefore.Add(validity)
	parent, signer := tmpl, crypto.Signer(key)
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", tmpl.Subject.CommonName, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	certPEM, err := cert.EncodeCertificates(c)
	if err != nil {
		return nil, err
	}
	return &pair{cert: c, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

package testworld

import (
	"bytes"
	"crypto/tls"
	"net"
	"testing"
)

// TestServingCertPairsStayPut: issuing a serving certificate again for the
// same name, as starting the second process of an active/standby pair
// does, leaves the files the first process was given as they were: a
// process reading its certificate, then its key, while the second is
// issued never gets halves of two pairs.
func TestServingCertPairsStayPut(t *testing.T) {
	dir := t.TempDir()
	ca, err := newAuthority(dir, "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Name: "host", Dir: dir, pki: &clusterPKI{ca: ca}}
	ips := []net.IP{net.IPv4(10, 251, 2, 1)}
	firstCert, firstKey, err := c.IssueServingCert("flotilla-node-far", ips)
	if err != nil {
		t.Fatal(err)
	}
	before, err := tls.LoadX509KeyPair(firstCert, firstKey)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := c.IssueServingCert("flotilla-node-far", ips); err != nil {
			t.Fatal(err)
		}
	}
	after, err := tls.LoadX509KeyPair(firstCert, firstKey)
	if err != nil {
		t.Fatalf("the first pair after issuing again: %v", err)
	}
	if !bytes.Equal(after.Certificate[0], before.Certificate[0]) {
		t.Errorf("issuing again rewrote %s", firstCert)
	}
}

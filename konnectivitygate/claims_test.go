package konnectivitygate

import (
	"crypto/x509"
	"net"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"flotilla.io/flotilla/internal/wellknown"
)

func TestParseClaims(t *testing.T) {
	for name, tc := range map[string]struct {
		values  []string
		want    []Claim
		wantErr bool
	}{
		"none":         {},
		"one":          {values: []string{"ipv4=10.0.0.5"}, want: []Claim{{"ipv4", "10.0.0.5"}}},
		"encoded":      {values: []string{"host=a.example&ipv6=fd00%3A%3A1"}, want: []Claim{{"host", "a.example"}, {"ipv6", "fd00::1"}}},
		"repeated key": {values: []string{"ipv4=10.0.0.5&ipv4=10.0.0.6"}, want: []Claim{{"ipv4", "10.0.0.5"}, {"ipv4", "10.0.0.6"}}},
		// The server refuses two values; the gate checks both anyway.
		"two values": {values: []string{"ipv4=10.0.0.5", "default-route=true"}, want: []Claim{{"ipv4", "10.0.0.5"}, {"default-route", "true"}}},
		"semicolon":  {values: []string{"ipv4=10.0.0.5;ipv4=10.0.0.6"}, wantErr: true},
		"bad escape": {values: []string{"ipv4=%zz"}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseClaims(tc.values)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUncovered(t *testing.T) {
	marker, err := url.Parse(wellknown.KonnectivityDefaultRouteURI)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := url.Parse("urn:flotilla:konnectivity:something-else")
	site := &x509.Certificate{
		IPAddresses: []net.IP{net.ParseIP("10.0.0.5"), net.ParseIP("fd00::5")},
		DNSNames:    []string{"Site.example", "*.wild.example"},
		URIs:        []*url.URL{other},
	}
	world := &x509.Certificate{URIs: []*url.URL{marker}}
	for name, tc := range map[string]struct {
		cert   *x509.Certificate
		claims string
		want   string // the claim refused; empty when all are covered
	}{
		"no claims":                     {cert: site},
		"its address":                   {cert: site, claims: "ipv4=10.0.0.5"},
		"its IPv6 address":              {cert: site, claims: "ipv6=fd00::5"},
		"its host, any case":            {cert: site, claims: "host=site.EXAMPLE"},
		"all of its own":                {cert: site, claims: "ipv4=10.0.0.5&ipv6=fd00::5&host=site.example"},
		"another address":               {cert: site, claims: "ipv4=10.0.0.6", want: "ipv4=10.0.0.6"},
		"one of them another's":         {cert: site, claims: "ipv4=10.0.0.5&ipv4=10.0.0.6", want: "ipv4=10.0.0.6"},
		"IPv4 claimed as ipv6":          {cert: site, claims: "ipv6=10.0.0.5", want: "ipv6=10.0.0.5"},
		"IPv4-mapped IPv6":              {cert: site, claims: "ipv6=::ffff:10.0.0.5", want: "ipv6=::ffff:10.0.0.5"},
		"not canonical":                 {cert: site, claims: "ipv6=fd00:0::5", want: "ipv6=fd00:0::5"},
		"leading zeros":                 {cert: site, claims: "ipv4=010.0.0.5", want: "ipv4=010.0.0.5"},
		"zone":                          {cert: site, claims: "ipv6=fd00::5%25eth0", want: "ipv6=fd00::5%eth0"},
		"empty address":                 {cert: site, claims: "ipv4=", want: "ipv4="},
		"another host":                  {cert: site, claims: "host=other.example", want: "host=other.example"},
		"a host under a wildcard SAN":   {cert: site, claims: "host=a.wild.example", want: "host=a.wild.example"},
		"the wildcard itself":           {cert: site, claims: "host=*.wild.example", want: "host=*.wild.example"},
		"default route without marker":  {cert: site, claims: "default-route=true", want: "default-route=true"},
		"default route spelled 1":       {cert: site, claims: "default-route=1", want: "default-route=1"},
		"default route unreadable":      {cert: site, claims: "default-route=yes", want: "default-route=yes"},
		"no default route claims none":  {cert: site, claims: "default-route=false"},
		"default route with marker":     {cert: world, claims: "default-route=true"},
		"marker names no address":       {cert: world, claims: "default-route=true&ipv4=10.0.0.5", want: "ipv4=10.0.0.5"},
		"cidr is never checked, so out": {cert: site, claims: "cidr=10.0.0.0/24", want: "cidr=10.0.0.0/24"},
		"unknown type":                  {cert: site, claims: "IPv4=10.0.0.5", want: "IPv4=10.0.0.5"},
	} {
		t.Run(name, func(t *testing.T) {
			claims, err := ParseClaims([]string{tc.claims})
			if err != nil {
				t.Fatal(err)
			}
			c, bad := Uncovered(tc.cert, claims)
			got := ""
			if bad {
				got = c.String()
			}
			if got != tc.want {
				t.Errorf("refused %q, want %q", got, tc.want)
			}
		})
	}
}

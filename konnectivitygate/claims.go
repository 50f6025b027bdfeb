package konnectivitygate

import (
	"crypto/x509"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"flotilla.io/flotilla/internal/wellknown"
)

// IdentifiersHeader is the gRPC metadata in which an agent states its
// identifiers on its Connect stream (apiserver-network-proxy's
// proto/header.AgentIdentifiers), URL-encoded as in
// `ipv4=10.0.0.5&host=site.example`. gRPC metadata keys are lower case on
// the wire; net/http canonicalises them, so it is looked up through
// http.Header.
const IdentifiersHeader = "agentIdentifiers"

// AgentIDHeader is the gRPC metadata naming the agent (proto/header.AgentID):
// logged, not checked, since the destHost and defaultRoute strategies never
// route by it.
const AgentIDHeader = "agentID"

// Claim is one identifier an agent claims: ipv4, ipv6, host or
// default-route with its value.
type Claim struct {
	Type, Value string
}

func (c Claim) String() string { return c.Type + "=" + c.Value }

// ParseClaims parses the values of IdentifiersHeader into claims, in
// order. konnectivity-server takes only a single value and refuses the
// stream otherwise; every value is returned here all the same, so that
// nothing the server could read goes unchecked.
func ParseClaims(values []string) ([]Claim, error) {
	var claims []Claim
	for _, v := range values {
		q, err := url.ParseQuery(v)
		if err != nil {
			return nil, fmt.Errorf("agent identifiers %q: %w", v, err)
		}
		for _, typ := range slices.Sorted(maps.Keys(q)) {
			for _, value := range q[typ] {
				claims = append(claims, Claim{Type: typ, Value: value})
			}
		}
	}
	return claims, nil
}

// Uncovered returns the first of claims that cert does not name, and
// whether there is one. The rule, one per identifier type the server
// routes by:
//   - ipv4=A, ipv6=A: A, written in its canonical form, is one of cert's IP
//     SANs;
//   - host=H: H is one of cert's DNS SANs, compared without case; a
//     wildcard SAN names no host;
//   - default-route=true (or any other value strconv.ParseBool reads as
//     true, or cannot read): cert carries the URI SAN
//     wellknown.KonnectivityDefaultRouteURI; default-route=false claims
//     nothing.
//
// Any other type (cidr, or one a later server may learn) is refused: the
// server of today ignores it, and a gate that let it through unchecked
// would let an agent claim what a later server routes by.
func Uncovered(cert *x509.Certificate, claims []Claim) (Claim, bool) {
	for _, c := range claims {
		if !covered(cert, c) {
			return c, true
		}
	}
	return Claim{}, false
}

func covered(cert *x509.Certificate, c Claim) bool {
	switch c.Type {
	case "ipv4", "ipv6":
		a, err := netip.ParseAddr(c.Value)
		// Only the canonical spelling: the server keys its agents by the
		// string, and a dial names an address canonically.
		if err != nil || a.String() != c.Value || a.Zone() != "" || a.Is4() != (c.Type == "ipv4") || a.Is4In6() {
			return false
		}
		return slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool {
			san, ok := netip.AddrFromSlice(ip)
			return ok && san.Unmap() == a
		})
	case "host":
		if c.Value == "" || strings.Contains(c.Value, "*") {
			return false
		}
		return slices.ContainsFunc(cert.DNSNames, func(san string) bool { return strings.EqualFold(san, c.Value) })
	case "default-route":
		if on, err := strconv.ParseBool(c.Value); err == nil && !on {
			return true
		}
		return slices.ContainsFunc(cert.URIs, func(u *url.URL) bool { return u.String() == wellknown.KonnectivityDefaultRouteURI })
	default:
		return false
	}
}

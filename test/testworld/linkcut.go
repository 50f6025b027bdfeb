// This file cuts links the way they fail in the field: packets dropped
// both ways, so that connections neither close nor get refused but stall
// until the peers' own timeouts notice, and heal without a restart of
// anything.

package testworld

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// CutLink drops every packet between the site and the world, both ways,
// as a dead uplink or gateway does, until heal is called. What runs inside
// the site keeps reaching what runs inside it (its own apiserver, say);
// the world and the site no longer hear from each other. heal may be
// called more than once; a test calls it from t.Cleanup too, so that a
// failure never leaves the site cut off.
func (s *Site) CutLink() (heal func() error, err error) {
	nft, err := findNft()
	if err != nil {
		return nil, err
	}
	table := "cut-link"
	return cut(fmt.Sprintf("site %s", s.Name), func(args ...string) *exec.Cmd { return s.Command(nft, args...) }, table,
		// Only lo is the site's own: everything else leads to the world.
		`iifname != "lo" drop`, `oifname != "lo" drop`)
}

// CutTCP drops every packet to and from addr:port in the world's network
// namespace, both ways, until heal is called: the programs that reach a
// server at that address lose their link to it, those that reach it at
// another address (127.0.0.1 for the apiservers) do not. A test gives the
// program it means to cut off a kubeconfig naming addr (see
// Cluster.UserKubeconfigAt). heal may be called more than once.
func CutTCP(addr string, port int) (heal func() error, err error) {
	if !InNetns() {
		return nil, errors.New("links are cut from inside the world's network namespace (RunInNetns)")
	}
	ip := net.ParseIP(addr).To4()
	if ip == nil {
		return nil, fmt.Errorf("cut %s:%d: not an IPv4 address", addr, port)
	}
	nft, err := findNft()
	if err != nil {
		return nil, err
	}
	p := strconv.Itoa(port)
	return cut(addr+":"+p, func(args ...string) *exec.Cmd { return exec.Command(nft, args...) }, "cut-"+strings.ReplaceAll(addr, ".", "-")+"-"+p,
		// Requests are dropped as they arrive, answers as they leave.
		fmt.Sprintf("ip daddr %s tcp dport %s drop", addr, p), fmt.Sprintf("ip saddr %s tcp sport %s drop", addr, p))
}

// cut adds nftables table with an input and an output chain holding rule
// in and rule out, and returns what deletes the table again.
func cut(what string, nft func(args ...string) *exec.Cmd, table, in, out string) (func() error, error) {
	steps := []string{
		"add table inet " + table,
		// Ahead of the site's own firewall (priority 0).
		"add chain inet " + table + " input { type filter hook input priority -10; policy accept; }",
		"add chain inet " + table + " output { type filter hook output priority -10; policy accept; }",
		"add rule inet " + table + " input " + in,
		"add rule inet " + table + " output " + out,
	}
	var once sync.Once
	var healErr error
	heal := func() error {
		once.Do(func() {
			if b, err := nft("delete table inet " + table).CombinedOutput(); err != nil {
				healErr = fmt.Errorf("heal the link of %s: %w: %s", what, err, strings.TrimSpace(string(b)))
			}
		})
		return healErr
	}
	for _, step := range steps {
		if b, err := nft(step).CombinedOutput(); err != nil {
			_ = heal()
			return nil, fmt.Errorf("cut the link of %s: nft %s: %w: %s", what, step, err, strings.TrimSpace(string(b)))
		}
	}
	return heal, nil
}

// UserKubeconfigAt is UserKubeconfig for a program that reaches the
// apiserver at addr, an address its serving certificate holds
// (AdvertiseAddress, say), rather than 127.0.0.1: CutTCP can then cut that
// program's link alone.
func (c *Cluster) UserKubeconfigAt(addr, user string, groups ...string) (string, error) {
	u, err := url.Parse(c.Server())
	if err != nil {
		return "", err
	}
	return c.userKubeconfig("https://"+net.JoinHostPort(addr, u.Port()), "-at-"+addr, user, groups...)
}

// APIServerPort is the port the cluster's apiserver listens on.
func (c *Cluster) APIServerPort() int { return c.ports.apiserver }

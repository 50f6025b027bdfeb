package testworld

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Site is a network of its own behind a one-way link, as a member cluster
// behind NAT is: its processes reach the world through Gateway, and nothing
// in the world can open a connection to them.
//
// It is a network namespace joined to the world's by a veth pair. The site
// has Addr on its loopback device (what its processes advertise) and a
// default route through the pair to the world; its outgoing connections
// come from LinkAddr, its end of the pair. The world has no route to Addr,
// and the site's firewall (nftables, as a NAT gateway's connection
// tracking) refuses every connection that arrives through the pair unless
// the site opened it: the world can answer, never call.
type Site struct {
	// Name names the site in errors and logs.
	Name string
	// Addr is the site's own address, on its loopback device.
	Addr string
	// LinkAddr is the site's end of the veth pair, the source of its
	// connections into the world.
	LinkAddr string
	// Gateway is the world's end of the pair: the address at which the
	// site reaches the world's listeners (those bound to 0.0.0.0).
	Gateway string

	holder *exec.Cmd // holds the namespace open
	nsPath string
	link   string // the world's end of the pair
}

// Site addresses: site n has 10.251.n.1 on its loopback device and
// 10.252.n.2 on its end of the pair, the world 10.252.n.1 on its end.
const (
	siteAddrFmt = "10.251.%d.1"
	linkNetFmt  = "10.252.%d.%d"
)

// NewSite makes site n (1 to 250) of the world whose network namespace this
// process runs in (see RunInNetns). Close removes it; so does the end of
// this process.
func NewSite(name string, n int) (*Site, error) {
	if !InNetns() {
		return nil, errors.New("a site is made from inside the world's network namespace (RunInNetns)")
	}
	if n < 1 || n > 250 {
		return nil, fmt.Errorf("site number %d is not in 1..250", n)
	}
	ip, err := findIP()
	if err != nil {
		return nil, err
	}
	nft, err := findNft()
	if err != nil {
		return nil, err
	}
	s := &Site{
		Name:     name,
		Addr:     fmt.Sprintf(siteAddrFmt, n),
		LinkAddr: fmt.Sprintf(linkNetFmt, n, 2),
		Gateway:  fmt.Sprintf(linkNetFmt, n, 1),
	}
	// A process in a network namespace of its own holds the namespace for
	// as long as the site lives, and dies with this process.
	s.holder = exec.Command("sleep", "infinity")
	s.holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.holder.Start(); err != nil {
		return nil, fmt.Errorf("site %s: start the process holding its network namespace: %w", name, err)
	}
	s.nsPath = fmt.Sprintf("/proc/%d/ns/net", s.holder.Process.Pid)
	world, site := fmt.Sprintf("site%dw", n), fmt.Sprintf("site%ds", n)
	s.link = world
	pid := fmt.Sprint(s.holder.Process.Pid)
	steps := [][]string{
		{ip, "link", "add", world, "type", "veth", "peer", "name", site, "netns", pid},
		{ip, "addr", "add", s.Gateway + "/30", "dev", world},
		{ip, "link", "set", world, "up"},
		s.in(ip, "link", "set", "lo", "up"),
		s.in(ip, "addr", "add", s.Addr+"/32", "dev", "lo"),
		s.in(ip, "addr", "add", s.LinkAddr+"/30", "dev", site),
		s.in(ip, "link", "set", site, "up"),
		s.in(ip, "route", "add", "default", "via", s.Gateway, "src", s.LinkAddr),
		s.in(nft, "add table inet site"),
		s.in(nft, "add chain inet site input { type filter hook input priority 0; policy accept; }"),
		// reject rather than drop: a refused call fails at once, where a
		// real NAT gateway would let it time out.
		s.in(nft, fmt.Sprintf(`add rule inet site input iifname "%s" ct state new reject`, site)),
	}
	for _, step := range steps {
		if out, err := exec.Command(step[0], step[1:]...).CombinedOutput(); err != nil {
			s.Close()
			return nil, fmt.Errorf("site %s: %s: %w: %s", name, strings.Join(step, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return s, nil
}

// in is the command line that runs path with args in the site's namespace.
func (s *Site) in(path string, args ...string) []string {
	return append([]string{"nsenter", "--net=" + s.nsPath, "--", path}, args...)
}

// wrap returns the command line that runs path with args in the site.
func (s *Site) wrap(path string, args []string) (string, []string) {
	line := s.in(path, args...)
	return line[0], line[1:]
}

// NetnsPath is the site's network namespace, for nsenter --net.
func (s *Site) NetnsPath() string { return s.nsPath }

// Command returns a command that runs path with args in the site.
func (s *Site) Command(path string, args ...string) *exec.Cmd {
	line := s.in(path, args...)
	return exec.Command(line[0], line[1:]...)
}

// DialContext opens a connection from inside the site, as one of its
// processes would. It is how a test, which runs in the world, looks into a
// site it cannot otherwise reach; nothing of flotilla's may use it.
func (s *Site) DialContext(ctx context.Context, network, address string) (conn net.Conn, err error) {
	if rerr := s.run(func() {
		var d net.Dialer
		conn, err = d.DialContext(ctx, network, address)
	}); rerr != nil {
		return nil, rerr
	}
	return conn, err
}

// Listen listens inside the site, as one of its processes would.
func (s *Site) Listen(network, address string) (l net.Listener, err error) {
	if rerr := s.run(func() { l, err = net.Listen(network, address) }); rerr != nil {
		return nil, rerr
	}
	return l, err
}

// run calls f on a thread that is in the site's network namespace for the
// call: the sockets f makes are the site's, and stay so.
func (s *Site) run(f func()) error {
	if err := runInNetns(s.nsPath, f); err != nil {
		return fmt.Errorf("site %s: %w", s.Name, err)
	}
	return nil
}

// runInNetns calls f on a thread that is in the network namespace at
// nsPath for the call: the sockets f makes are that namespace's, and stay
// so.
func runInNetns(nsPath string, f func()) error {
	done := make(chan error, 1)
	go func() {
		// A thread that cannot come back is never unlocked, so Go
		// discards it with this goroutine.
		runtime.LockOSThread()
		back, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer back.Close()
		ns, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer ns.Close()
		if err := setns(ns); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter network namespace %s: %w", nsPath, err)
			return
		}
		f()
		if setns(back) == nil {
			runtime.UnlockOSThread()
		}
		done <- nil
	}()
	return <-done
}

func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }

// Close removes the site: its namespace, with the site's end of the pair
// and, with it, the world's.
func (s *Site) Close() error {
	if s.holder == nil || s.holder.Process == nil {
		return nil
	}
	// The pair goes now, not when the kernel gets round to the namespace
	// the holder leaves behind: the next site of that number needs its
	// names.
	if ip, err := findIP(); err == nil && s.link != "" {
		_ = exec.Command(ip, "link", "del", s.link).Run()
	}
	_ = s.holder.Process.Kill()
	_, err := s.holder.Process.Wait()
	s.holder = nil
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return fmt.Errorf("site %s: %w", s.Name, err)
	}
	return nil
}

// findNft finds nftables' nft, which a site's firewall needs.
func findNft() (string, error) {
	if p, err := exec.LookPath("nft"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/nft", "/sbin/nft"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("the nft command is missing: install nftables (apt-get install nftables)")
}

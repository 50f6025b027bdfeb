package testworld

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

// AdvertiseIP is the address every component of a world advertises: the
// apiservers' --advertise-address and the fake nodes' InternalIP. It sits on
// the loopback device of the world's private network namespace, where it is
// local; kube-apiserver refuses to proxy to a loopback node address such as
// 127.0.0.1, which is why a second address is needed at all.
const AdvertiseIP = "10.250.1.1"

// netnsEnv marks a process as the re-executed child that already runs in the
// private network namespace.
const netnsEnv = "FLOTILLA_TESTWORLD_NETNS"

// InNetns reports whether this process is the child that ReexecInNetns
// started inside the world's private network namespace.
func InNetns() bool { return os.Getenv(netnsEnv) == "1" }

// RunInNetns runs run inside a private network namespace and returns the
// exit code to exit with. Called in a process outside the namespace, it
// re-executes the program there (see ReexecInNetns) and returns the child's
// exit code without calling run; in the child it prepares the namespace and
// returns run(). Use it first thing:
//
//	func TestMain(m *testing.M) { os.Exit(testworld.RunInNetns(m.Run)) }
//	func main() { os.Exit(testworld.RunInNetns(realMain)) }
func RunInNetns(run func() int) int {
	child, code, err := ReexecInNetns()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testworld: %v\n", err)
		return 1
	}
	if !child {
		return code
	}
	return run()
}

// ReexecInNetns makes the rest of the program run in a private network
// namespace. Outside the namespace it re-runs /proc/self/exe with the same
// arguments and environment plus a marker, in a new network namespace,
// forwards SIGINT and SIGTERM to it, waits, and returns child=false with the
// exit code the caller should exit with. In the re-run child (marker set) it
// brings up lo, adds AdvertiseIP to it and returns child=true.
//
// A new network namespace holds nothing but its own loopback device, so no
// process of the world can reach, or be reached from, any address beyond
// it. Creating one needs CAP_SYS_ADMIN (root).
func ReexecInNetns() (child bool, exitCode int, err error) {
	if InNetns() {
		if err := setupNetns(); err != nil {
			return true, 1, err
		}
		return true, 0, nil
	}
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	// /proc/self/exe names this very binary even if the file was replaced or
	// removed (go test deletes its binaries); os.Executable is only used for
	// the error messages.
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET,
		// The child, and through its own Pdeathsig its processes, must not
		// outlive this parent.
		Pdeathsig: syscall.SIGKILL,
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return false, 1, fmt.Errorf("re-execute %s in a new network namespace (needs root): %w", self, err)
	}
	waited := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				// A Ctrl-C reaches the child directly too (same process
				// group); a kill aimed at this parent only reaches it so.
				_ = cmd.Process.Signal(s)
			case <-waited:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(waited)
	if err == nil {
		return false, 0, nil
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return false, 1, fmt.Errorf("wait for %s in its network namespace: %w", self, err)
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return false, 128 + int(ws.Signal()), nil
	}
	return false, exitErr.ExitCode(), nil
}

// setupNetns brings up lo and puts AdvertiseIP on it. It refuses to touch a
// namespace that has devices other than lo: the marker may have been
// inherited or set by hand in the machine's own namespace, whose network this
// package must never change.
func setupNetns() error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list network interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		if ifc.Name != "lo" {
			return fmt.Errorf("%s=1 is set but this process is not in a private network namespace (it has interface %q); unset it", netnsEnv, ifc.Name)
		}
	}
	ip, err := findIP()
	if err != nil {
		return err
	}
	if out, err := exec.Command(ip, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set lo up: %w: %s", err, strings.TrimSpace(string(out)))
	}
	// A process of the world may itself call ReexecInNetns (a demo binary
	// started by World.StartProcess inherits the marker), so the address may
	// be there already.
	if has, err := loHasAdvertiseIP(); err != nil {
		return err
	} else if has {
		return nil
	}
	if out, err := exec.Command(ip, "addr", "add", AdvertiseIP+"/32", "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("ip addr add %s/32 dev lo: %w: %s", AdvertiseIP, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func findIP() (string, error) {
	if p, err := exec.LookPath("ip"); err == nil {
		return p, nil
	}
	// PATH may lack the sbin directories for a non-login shell.
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("the ip command is missing: install iproute2 (apt-get install iproute2)")
}

func loHasAdvertiseIP() (bool, error) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return false, fmt.Errorf("find lo: %w", err)
	}
	addrs, err := lo.Addrs()
	if err != nil {
		return false, fmt.Errorf("list addresses of lo: %w", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.String() == AdvertiseIP {
			return true, nil
		}
	}
	return false, nil
}

package testworld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Dataplane gives one fake node of a member cluster a real data plane, for
// a test that sends traffic through a Service: kwok's pods have IPs but no
// network, and nothing programs Services.
//
// The node is a network namespace of its own, joined to the world's by a
// veth pair: the world has Gateway on its end, the node Addr on its end and
// a default route through it, which is how it reaches the member's
// apiserver. The member's own kube-proxy runs there as that node
// (nftables mode: the machine has no iptables), so a connection opened in
// the node to a Service's ClusterIP is translated to one of the Service's
// endpoints as on a real node. AddPod puts a pod's IP behind the node, in a
// namespace of its own, with a listener on it.
//
// Stop removes everything; so does the end of this process.
type Dataplane struct {
	// Node is the fake node whose data plane this is.
	Node string
	// Addr is the node's end of its link to the world.
	Addr string
	// Gateway is the world's end of the link.
	Gateway string

	ns    *netnsHolder
	link  string // the world's end of the pair
	proxy *Process

	mu   sync.Mutex
	pods []*DataplanePod
}

// DataplaneConfig says which node to give a data plane.
type DataplaneConfig struct {
	// Cluster is the member the node belongs to.
	Cluster string
	// Node is one of its fake nodes.
	Node string
	// Number (1 to 250) picks the node's link addresses, 10.253.N.1 and
	// 10.253.N.2; data planes alive at once need different numbers.
	Number int
	// KubeProxy is kube-proxy of the cluster's version (KubeProxyOf).
	KubeProxy string
}

// Data plane addresses: data plane n links the world (10.253.n.1) and its
// node (10.253.n.2); every pod reaches its node at podGateway, which the
// node has on each pod's end of a pair.
const (
	dataplaneLinkFmt = "10.253.%d.%d"
	podGateway       = "169.254.1.1"
	// kubeProxyHealthz is where kube-proxy answers /healthz in the node.
	kubeProxyHealthz = "127.0.0.1:10256"
)

// dataplaneReadyTimeout bounds the wait for kube-proxy's first sync.
const dataplaneReadyTimeout = time.Minute

// StartDataplane gives a node of a member a data plane (see Dataplane) and
// returns once its kube-proxy has synced its rules. It must be called in the
// world's network namespace (RunInNetns).
func (w *World) StartDataplane(ctx context.Context, cfg DataplaneConfig) (*Dataplane, error) {
	if !InNetns() {
		return nil, errors.New("a data plane is made from inside the world's network namespace (RunInNetns)")
	}
	if cfg.Number < 1 || cfg.Number > 250 {
		return nil, fmt.Errorf("data plane number %d is not in 1..250", cfg.Number)
	}
	c := w.Member(cfg.Cluster)
	if c == nil {
		return nil, fmt.Errorf("data plane: no member %q", cfg.Cluster)
	}
	d := &Dataplane{
		Node:    cfg.Node,
		Addr:    fmt.Sprintf(dataplaneLinkFmt, cfg.Number, 2),
		Gateway: fmt.Sprintf(dataplaneLinkFmt, cfg.Number, 1),
		link:    fmt.Sprintf("dp%dw", cfg.Number),
	}
	if err := d.start(ctx, w, c, cfg.KubeProxy); err != nil {
		return nil, errors.Join(fmt.Errorf("data plane of node %s in %s: %w", cfg.Node, cfg.Cluster, err), d.Stop())
	}
	return d, nil
}

// start makes the node's namespace and link, and runs kube-proxy there.
func (d *Dataplane) start(ctx context.Context, w *World, c *Cluster, kubeProxy string) error {
	ip, err := findIP()
	if err != nil {
		return err
	}
	if d.ns, err = newNetnsHolder(); err != nil {
		return err
	}
	err = runSteps(
		[]string{ip, "link", "add", d.link, "type", "veth", "peer", "name", "eth0", "netns", d.ns.pid()},
		[]string{ip, "addr", "add", d.Gateway + "/30", "dev", d.link},
		[]string{ip, "link", "set", d.link, "up"},
		d.ns.in(ip, "link", "set", "lo", "up"),
		d.ns.in(ip, "addr", "add", d.Addr+"/30", "dev", "eth0"),
		d.ns.in(ip, "link", "set", "eth0", "up"),
		d.ns.in(ip, "route", "add", "default", "via", d.Gateway),
	)
	if err != nil {
		return err
	}
	// kube-proxy reaches the apiserver as a node would, through the link;
	// system:kube-proxy holds the system:node-proxier role.
	server := "https://" + net.JoinHostPort(c.advertiseIP, strconv.Itoa(c.ports.apiserver))
	kubeconfig, err := c.userKubeconfig(server, "-from-"+safeFileName(d.Node), "system:kube-proxy")
	if err != nil {
		return err
	}
	nft, err := findNft()
	if err != nil {
		return err
	}
	// kube-proxy's nftables mode runs nft, which may not be on PATH.
	args := d.ns.in("env", "PATH="+filepath.Dir(nft)+string(os.PathListSeparator)+os.Getenv("PATH"), kubeProxy,
		"--proxy-mode=nftables",
		"--hostname-override="+d.Node,
		"--kubeconfig="+kubeconfig,
		"--cluster-cidr="+c.PodCIDR,
		// Connection tracking's limits are the machine's, not the
		// namespace's: leave them alone.
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--healthz-bind-address="+kubeProxyHealthz,
		"--metrics-bind-address=127.0.0.1:10249",
		"--v=2",
		// A test stops kube-proxy seconds after its last sync; its log
		// should still show it.
		"--log-flush-frequency=1s",
	)
	if d.proxy, err = w.StartProcess(c.Name+"-kube-proxy-"+safeFileName(d.Node), args[0], args[1:]...); err != nil {
		return err
	}
	return d.waitReady(ctx)
}

// waitReady waits until kube-proxy reports its first sync of the rules.
func (d *Dataplane) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dataplaneReadyTimeout)
	defer cancel()
	client := d.HTTPClient()
	var last string
	for {
		if exited, err := d.proxy.Exited(); exited {
			return fmt.Errorf("kube-proxy exited (%v); the end of its log:\n%s", err, d.proxy.LogTail(logTailLines))
		}
		last = d.probe(ctx, client)
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-proxy not ready after %s (%s); the end of its log:\n%s", dataplaneReadyTimeout, last, d.proxy.LogTail(logTailLines))
		case <-time.After(pollInterval):
		}
	}
}

// probe asks kube-proxy's /healthz once and returns why its rules are not
// synced yet, or "" if they are. /healthz answers 200 from the start; the
// time of a proxier's last sync appears only once it has synced.
func (d *Dataplane) probe(ctx context.Context, client *http.Client) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+kubeProxyHealthz+"/healthz", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "/healthz: " + err.Error()
	}
	return kubeProxySynced(resp.StatusCode, body)
}

// kubeProxySynced reads an answer of kube-proxy's /healthz and returns why
// its rules are not synced yet, or "" if they are.
func kubeProxySynced(code int, body []byte) string {
	var health struct {
		Status map[string]struct {
			LastUpdated time.Time `json:"lastUpdated"`
		} `json:"status"`
	}
	if code != http.StatusOK {
		return fmt.Sprintf("/healthz: %d %s", code, body)
	}
	if err := json.Unmarshal(body, &health); err != nil {
		return "/healthz: " + err.Error()
	}
	for _, s := range health.Status {
		if !s.LastUpdated.IsZero() {
			return ""
		}
	}
	return "no sync yet"
}

// DialContext opens a connection from inside the node, as one of its
// processes would; a connection to a ClusterIP goes through kube-proxy's
// rules.
func (d *Dataplane) DialContext(ctx context.Context, network, address string) (conn net.Conn, err error) {
	if rerr := d.ns.run(func() {
		var dl net.Dialer
		conn, err = dl.DialContext(ctx, network, address)
	}); rerr != nil {
		return nil, fmt.Errorf("node %s: %w", d.Node, rerr)
	}
	return conn, err
}

// HTTPClient is an HTTP client in the node. It opens a connection per
// request, so that each request meets kube-proxy's current rules.
func (d *Dataplane) HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// KubeProxy is the node's kube-proxy process.
func (d *Dataplane) KubeProxy() *Process { return d.proxy }

// DataplanePod is a pod's network behind a data plane's node: a namespace
// of its own holding the pod's IP, joined to the node by a veth pair, with
// an HTTP server on the pod's IP that answers every request with the pod's
// name.
type DataplanePod struct {
	// Name is what the pod's server answers.
	Name string
	// IP is the pod's IP.
	IP string

	ns   *netnsHolder
	link string // the node's end of the pair
	srv  *http.Server
}

// AddPod puts a pod, whatever cluster it runs in, behind the node: its IP
// in a namespace of its own, routed from the node, with an HTTP server on
// ip:port answering name. The node reaches it directly, as the pod network
// of a cluster mesh would.
func (d *Dataplane) AddPod(name, ip string, port int) (*DataplanePod, error) {
	if net.ParseIP(ip).To4() == nil {
		return nil, fmt.Errorf("pod %s: %q is not an IPv4 address", name, ip)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := &DataplanePod{Name: name, IP: ip, link: fmt.Sprintf("pod%d", len(d.pods))}
	if err := p.start(d, port); err != nil {
		return nil, errors.Join(fmt.Errorf("pod %s behind node %s: %w", name, d.Node, err), p.stop(d))
	}
	d.pods = append(d.pods, p)
	return p, nil
}

// start makes the pod's namespace and link, and serves on its IP.
func (p *DataplanePod) start(d *Dataplane, port int) error {
	ip, err := findIP()
	if err != nil {
		return err
	}
	if p.ns, err = newNetnsHolder(); err != nil {
		return err
	}
	err = runSteps(
		d.ns.in(ip, "link", "add", p.link, "type", "veth", "peer", "name", "eth0", "netns", p.ns.pid()),
		d.ns.in(ip, "addr", "add", podGateway+"/32", "dev", p.link),
		d.ns.in(ip, "link", "set", p.link, "up"),
		d.ns.in(ip, "route", "add", p.IP+"/32", "dev", p.link),
		p.ns.in(ip, "link", "set", "lo", "up"),
		p.ns.in(ip, "addr", "add", p.IP+"/32", "dev", "eth0"),
		p.ns.in(ip, "link", "set", "eth0", "up"),
		p.ns.in(ip, "route", "add", podGateway+"/32", "dev", "eth0"),
		p.ns.in(ip, "route", "add", "default", "via", podGateway, "dev", "eth0"),
	)
	if err != nil {
		return err
	}
	var l net.Listener
	if rerr := p.ns.run(func() { l, err = net.Listen("tcp", net.JoinHostPort(p.IP, strconv.Itoa(port))) }); rerr != nil {
		return rerr
	}
	if err != nil {
		return err
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, p.Name) }),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.srv.Serve(l) }()
	return nil
}

// stop closes the pod's server and removes its namespace and link.
func (p *DataplanePod) stop(d *Dataplane) error {
	var errs []error
	if p.srv != nil {
		errs = append(errs, p.srv.Close())
	}
	if ip, err := findIP(); err == nil && d.ns != nil && p.ns != nil {
		del := d.ns.in(ip, "link", "del", p.link)
		_ = exec.Command(del[0], del[1:]...).Run()
	}
	if p.ns != nil {
		errs = append(errs, p.ns.close())
	}
	return errors.Join(errs...)
}

// Stop ends kube-proxy, the pods' servers, and removes every namespace and
// link the data plane made. It is safe to call on a data plane that failed
// to start.
func (d *Dataplane) Stop() error {
	var errs []error
	if d.proxy != nil {
		errs = append(errs, d.proxy.Stop())
	}
	d.mu.Lock()
	for _, p := range d.pods {
		errs = append(errs, p.stop(d))
	}
	d.pods = nil
	d.mu.Unlock()
	// The pair goes now, not when the kernel gets round to the namespace
	// the holder leaves behind: the next data plane of that number needs
	// its names.
	if ip, err := findIP(); err == nil && d.ns != nil {
		_ = exec.Command(ip, "link", "del", d.link).Run()
	}
	if d.ns != nil {
		errs = append(errs, d.ns.close())
		d.ns = nil
	}
	return errors.Join(errs...)
}

// netnsHolder is a network namespace held open by a process of its own,
// which dies with this process.
type netnsHolder struct {
	cmd  *exec.Cmd
	path string
}

func newNetnsHolder() (*netnsHolder, error) {
	cmd := exec.Command("sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the process holding a network namespace: %w", err)
	}
	return &netnsHolder{cmd: cmd, path: fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)}, nil
}

func (h *netnsHolder) pid() string { return strconv.Itoa(h.cmd.Process.Pid) }

// in is the command line that runs path with args in the namespace.
func (h *netnsHolder) in(path string, args ...string) []string {
	return append([]string{"nsenter", "--net=" + h.path, "--", path}, args...)
}

// run calls f on a thread in the namespace (see runInNetns).
func (h *netnsHolder) run(f func()) error { return runInNetns(h.path, f) }

// close ends the holder, and with it the namespace once nothing else is in
// it.
func (h *netnsHolder) close() error {
	_ = h.cmd.Process.Kill()
	_, err := h.cmd.Process.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return err
	}
	return nil
}

// runSteps runs each command line in turn and stops at the first that
// fails.
func runSteps(steps ...[]string) error {
	for _, step := range steps {
		if out, err := exec.Command(step[0], step[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(step, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

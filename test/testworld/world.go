package testworld

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HostName is the name of a world's host cluster.
const HostName = "host"

// maxMembers bounds the members so that their CIDRs (Service 10.96+i.0.0/16,
// pod 10.10+i.0.0/16) stay distinct.
const maxMembers = 64

// Config describes a world to start. The zero value is a host cluster alone.
type Config struct {
	// Members are the member clusters, each with its fake nodes.
	Members []ClusterConfig
	// HostNodes are fake nodes in the host cluster, for running workloads
	// on the host itself (a single-cluster baseline); when empty the host
	// runs no kwok.
	HostNodes []NodeSpec
	// Dir receives each cluster's directory (Dir/<cluster>) and the logs of
	// extra processes (Dir/<name>.log). It is created if missing and never
	// removed. When empty, a temporary directory is used and removed by
	// Stop unless KeepDir is set.
	Dir string
	// KeepDir keeps the temporary directory after Stop. Otherwise the
	// directory of a world that could not stop (its start failed, or its
	// process was killed) is removed by a Start a day after its process
	// has gone.
	KeepDir bool
	// ClientQPS and ClientBurst are the controller-managers' and
	// schedulers' client rate limits; defaults 500 and 1000, high enough
	// that benchmarks measure flotilla rather than client throttling.
	ClientQPS   float32
	ClientBurst int
	// StartTimeout bounds Start after the binaries are found; default 3
	// minutes.
	StartTimeout time.Duration
	// Bin gives the binaries; when nil, Start calls Binaries. Clusters of
	// another Kubernetes version than Bin's get that version's binaries
	// from BinariesOf.
	Bin *Bin
	// KubernetesVersion is the host's Kubernetes version, e.g. v1.36.3
	// (one of KubernetesVersions, or any other the module proxy serves);
	// empty for Bin's, by default the newest.
	KubernetesVersion string
	// FeatureGates are the host's feature gates, given to its apiserver,
	// controller-manager and scheduler.
	FeatureGates map[string]bool
	// Konnectivity runs the apiserver-network-proxy (see Konnectivity):
	// the host apiserver reaches nodes, pods and services through it, and
	// the host's metrics-server the kubelet endpoints; the world's own
	// network by a default-route agent, each member behind NAT by an
	// agent in its site.
	Konnectivity bool
	// Logf receives progress messages; nil discards them.
	Logf func(format string, args ...any)
}

// ClusterConfig describes one member cluster.
type ClusterConfig struct {
	// Name must be a DNS label, unique in the world and not "host".
	Name string
	// Nodes are the cluster's fake nodes; node names only need to be
	// unique within their cluster.
	Nodes []NodeSpec
	// BehindNAT runs the cluster in a Site of its own: it reaches the
	// host (at its site's Gateway), the host cannot reach it. This is
	// where a pull-mode member lives.
	BehindNAT bool
	// KubernetesVersion is the cluster's Kubernetes version; empty for the
	// world's default (see Config.Bin).
	KubernetesVersion string
	// FeatureGates are given to the cluster's apiserver, controller-manager
	// and scheduler. A gate a version does not know stops it from starting.
	FeatureGates map[string]bool
}

// World is a running host cluster with its member clusters and any extra
// processes started in it. Stop it when done.
type World struct {
	dir       string
	removeDir bool
	bin       Bin
	logf      func(string, ...any)
	host      *Cluster
	members   []*Cluster
	sites     []*Site
	konn      *Konnectivity
	ports     *portAllocator

	mu      sync.Mutex
	extra   []*Process
	stopped bool

	stopOnce    sync.Once
	stopErr     error
	stopSignals func()
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func (cfg Config) withDefaults() Config {
	if cfg.ClientQPS == 0 {
		cfg.ClientQPS = 500
	}
	if cfg.ClientBurst == 0 {
		cfg.ClientBurst = 1000
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 3 * time.Minute
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return cfg
}

func (cfg Config) validate() error {
	if len(cfg.Members) > maxMembers {
		return fmt.Errorf("%d members: at most %d are supported", len(cfg.Members), maxMembers)
	}
	names := map[string]bool{HostName: true}
	if err := validateNodes(HostName, cfg.HostNodes); err != nil {
		return err
	}
	for _, m := range cfg.Members {
		if !dnsLabel.MatchString(m.Name) {
			return fmt.Errorf("member name %q is not a DNS label", m.Name)
		}
		if names[m.Name] {
			return fmt.Errorf("member name %q is used twice or is the host's", m.Name)
		}
		names[m.Name] = true
		if err := validateNodes(m.Name, m.Nodes); err != nil {
			return err
		}
	}
	return nil
}

func validateNodes(cluster string, nodes []NodeSpec) error {
	seen := map[string]bool{}
	for _, n := range nodes {
		if n.Name == "" {
			return fmt.Errorf("cluster %s: a node has no name", cluster)
		}
		if seen[n.Name] {
			return fmt.Errorf("cluster %s: node %q appears twice", cluster, n.Name)
		}
		seen[n.Name] = true
	}
	return nil
}

// Start starts a world: the host and every member concurrently, each
// cluster ready (see Cluster) when Start returns. Until Stop, SIGINT and
// SIGTERM stop the world and exit the program with 128+signal, so that an
// interrupted test leaks no process. On error, whatever was started is
// stopped and the directory is kept for its logs.
func Start(ctx context.Context, cfg Config) (*World, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("start test world: %w", err)
	}
	var bin Bin
	if cfg.Bin != nil {
		bin = *cfg.Bin
		if err := bin.validate(); err != nil {
			return nil, fmt.Errorf("start test world: %w", err)
		}
	} else {
		var err error
		if bin, err = Binaries(ctx); err != nil {
			return nil, fmt.Errorf("start test world: %w", err)
		}
	}
	stages, err := bin.kwokStageFiles()
	if err != nil {
		return nil, fmt.Errorf("start test world: %w", err)
	}
	binOf, err := binariesByVersion(ctx, bin, cfg)
	if err != nil {
		return nil, fmt.Errorf("start test world: %w", err)
	}
	bin = binOf[cfg.KubernetesVersion]
	w := &World{bin: bin, logf: cfg.Logf, dir: cfg.Dir}
	if w.dir == "" {
		sweepTempDir(cfg.Logf)
		if w.dir, err = os.MkdirTemp("", dirPrefix); err != nil {
			return nil, fmt.Errorf("start test world: %w", err)
		}
		if err := markDir(w.dir, cfg.KeepDir); err != nil {
			return nil, fmt.Errorf("start test world: %w", err)
		}
		w.removeDir = !cfg.KeepDir
	} else if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return nil, fmt.Errorf("start test world: %w", err)
	}
	w.handleSignals()

	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	ports := newPortAllocator()
	w.ports = ports
	params := func(name string, index int, nodes []NodeSpec, version string, gates map[string]bool) clusterParams {
		return clusterParams{
			name: name, index: index, nodes: nodes, worldDir: w.dir, bin: binOf[version], kwokStages: stages,
			qps: cfg.ClientQPS, burst: cfg.ClientBurst, ports: ports, logf: cfg.Logf, featureGates: gates,
		}
	}
	// Sites first: the host's serving certificate names the addresses at
	// which they reach it.
	siteOf := map[string]*Site{}
	var gateways []net.IP
	for i, m := range cfg.Members {
		if !m.BehindNAT {
			continue
		}
		s, err := NewSite(m.Name, i+1)
		if err != nil {
			return nil, w.startFailed(err)
		}
		w.sites = append(w.sites, s)
		siteOf[m.Name] = s
		gateways = append(gateways, net.ParseIP(s.Gateway))
	}
	hp := params(HostName, 0, cfg.HostNodes, cfg.KubernetesVersion, cfg.FeatureGates)
	hp.extraIPs = gateways
	if cfg.Konnectivity {
		if w.konn, hp.egressSelectorConfig, err = newKonnectivity(filepath.Join(w.dir, "konnectivity"), ports); err != nil {
			return nil, w.startFailed(err)
		}
	}
	if w.host, err = newCluster(hp); err != nil {
		return nil, w.startFailed(err)
	}
	if w.konn != nil {
		// The frontend's serving certificate is the host CA's.
		if err := w.konn.prepareFrontend(w.host); err != nil {
			return nil, w.startFailed(err)
		}
	}
	for i, m := range cfg.Members {
		p := params(m.Name, i+1, m.Nodes, m.KubernetesVersion, m.FeatureGates)
		p.site = siteOf[m.Name]
		c, err := newCluster(p)
		if err != nil {
			return nil, w.startFailed(err)
		}
		w.members = append(w.members, c)
	}

	began := time.Now()
	clusters := w.Clusters()
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Go(func() {
			if err := c.start(ctx); err != nil {
				errs[i] = err
				cancel() // the world is useless without any one cluster
			}
		})
	}
	wg.Wait()
	if err := rootCause(errs); err != nil {
		return nil, w.startFailed(err)
	}
	if w.konn != nil {
		if err := w.startKonnectivity(ctx); err != nil {
			return nil, w.startFailed(err)
		}
	}
	w.logf("testworld: %d clusters ready in %.1fs (dir %s)", len(clusters), time.Since(began).Seconds(), w.dir)
	return w, nil
}

// binariesByVersion returns the binaries of each Kubernetes version cfg's
// clusters run, keyed by the version asked for ("" for bin's own).
func binariesByVersion(ctx context.Context, bin Bin, cfg Config) (map[string]Bin, error) {
	binOf := map[string]Bin{"": bin}
	if bin.KubernetesVersion != "" {
		binOf[bin.KubernetesVersion] = bin
	}
	versions := []string{cfg.KubernetesVersion}
	for _, m := range cfg.Members {
		versions = append(versions, m.KubernetesVersion)
	}
	for _, v := range versions {
		if _, ok := binOf[v]; ok {
			continue
		}
		k, err := BinariesOf(ctx, v)
		if err != nil {
			return nil, err
		}
		binOf[v] = bin.withKubernetes(k)
	}
	return binOf, nil
}

// startKonnectivity starts the proxy-server, the gate in front of it and
// the agents, and waits until every agent is connected.
func (w *World) startKonnectivity(ctx context.Context) error {
	if err := w.konn.startServer(w); err != nil {
		return err
	}
	if err := w.konn.startGate(ctx, w); err != nil {
		return err
	}
	names := []string{DefaultAgent}
	if err := w.konn.StartAgent(w, DefaultAgent, nil); err != nil {
		return err
	}
	for _, m := range w.members {
		if m.site != nil {
			name := AgentOf(m.Name)
			if err := w.konn.StartAgent(w, name, m.site); err != nil {
				return err
			}
			names = append(names, name)
		}
	}
	for _, name := range names {
		if err := w.konn.WaitAgentConnected(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// DefaultAgent is the name of the Konnectivity agent of the world's own
// network; AgentOf names a member's agent.
const DefaultAgent = "konnectivity-agent"

// AgentOf is the name of the Konnectivity agent in member's site.
func AgentOf(member string) string { return "konnectivity-agent-" + member }

// Konnectivity returns the world's apiserver-network-proxy, or nil when
// Config.Konnectivity was not set.
func (w *World) Konnectivity() *Konnectivity { return w.konn }

// rootCause joins the errors of clusters that failed by themselves, leaving
// out those that only saw the cancellation caused by another's failure.
func rootCause(errs []error) error {
	var roots, all []error
	for _, err := range errs {
		if err == nil {
			continue
		}
		all = append(all, err)
		if !errors.Is(err, context.Canceled) {
			roots = append(roots, err)
		}
	}
	if len(roots) > 0 {
		return errors.Join(roots...)
	}
	return errors.Join(all...)
}

// KeepFiles keeps the world's directory, logs and all, when it stops: for
// a run whose tests failed. A later Start removes it after staleAfter.
func (w *World) KeepFiles() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeDir = false
}

// startFailed stops what Start started and keeps the directory for its logs.
func (w *World) startFailed(err error) error {
	w.removeDir = false
	if stopErr := w.Stop(); stopErr != nil {
		err = errors.Join(err, stopErr)
	}
	return fmt.Errorf("start test world (logs in %s): %w", w.dir, err)
}

// handleSignals makes SIGINT and SIGTERM stop the world before the program
// exits: its processes are in their own process groups, so a Ctrl-C does
// not reach them, and Pdeathsig only covers an abrupt death.
func (w *World) handleSignals() {
	sigs := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	w.stopSignals = func() {
		signal.Stop(sigs)
		close(done)
	}
	go func() {
		select {
		case s := <-sigs:
			w.logf("testworld: %v: stopping the world", s)
			if err := w.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testworld: stop: %v\n", err)
			}
			code := 1
			if n, ok := s.(syscall.Signal); ok {
				code = 128 + int(n)
			}
			os.Exit(code)
		case <-done:
		}
	}()
}

// Host returns the host cluster.
func (w *World) Host() *Cluster { return w.host }

// Member returns the member cluster with the given name, or nil.
func (w *World) Member(name string) *Cluster {
	for _, m := range w.members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Members returns the member clusters in the order of Config.Members.
func (w *World) Members() []*Cluster { return append([]*Cluster(nil), w.members...) }

// Clusters returns the host followed by the members.
func (w *World) Clusters() []*Cluster {
	if w.host == nil {
		return w.Members()
	}
	return append([]*Cluster{w.host}, w.members...)
}

// Kubectl runs the world's kubectl against the host as admin, with stdin
// (nil for none), and returns its standard output; an error carries its
// standard error.
func (w *World) Kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, w.bin.Kubectl, append([]string{"--kubeconfig=" + w.host.KubeconfigPath}, args...)...)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// Dir returns the world's directory.
func (w *World) Dir() string { return w.dir }

// Bin returns the binaries the world runs, kubectl among them.
func (w *World) Bin() Bin { return w.bin }

// StartProcess starts an extra program (a flotilla-node, say) in the world:
// it logs to Dir/<name>.log, may be stopped on its own with Process.Stop,
// and is stopped by World.Stop before the clusters.
func (w *World) StartProcess(name, path string, args ...string) (*Process, error) {
	return w.StartSiteProcess(nil, name, path, args...)
}

// StartSiteProcess is StartProcess for a program that runs in site s (in
// the world when s is nil): a member's own flotilla-node in pull mode, or
// its Konnectivity agent.
func (w *World) StartSiteProcess(s *Site, name, path string, args ...string) (*Process, error) {
	if s != nil {
		path, args = s.wrap(path, args)
	}
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return nil, fmt.Errorf("start process: name %q must be a plain file name", name)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return nil, fmt.Errorf("start process %s: the world is stopped", name)
	}
	p, err := startProcess(name, filepath.Join(w.dir, name+".log"), path, args...)
	if err != nil {
		return nil, err
	}
	w.extra = append(w.extra, p)
	return p, nil
}

// FreePort returns a port for an extra process (a kubelet endpoint, say),
// distinct from every port the world hands out and below the kernel's
// ephemeral range, so no outgoing connection can be holding it.
func (w *World) FreePort() (int, error) { return w.ports.allocate() }

// Stop stops every process of the world, extra processes first, then all
// clusters in parallel, and removes a temporary directory unless it is to
// be kept. It is idempotent: later calls return the first call's result.
func (w *World) Stop() error {
	w.stopOnce.Do(func() {
		if w.stopSignals != nil {
			w.stopSignals()
		}
		w.mu.Lock()
		w.stopped = true
		extra := w.extra
		w.mu.Unlock()
		errs := []error{stopAll(extra)}
		clusters := w.Clusters()
		clusterErrs := make([]error, len(clusters))
		var wg sync.WaitGroup
		for i, c := range clusters {
			wg.Go(func() { clusterErrs[i] = c.stop() })
		}
		wg.Wait()
		errs = append(errs, clusterErrs...)
		for _, s := range w.sites {
			errs = append(errs, s.Close())
		}
		w.mu.Lock()
		remove := w.removeDir
		w.mu.Unlock()
		if remove {
			if err := os.RemoveAll(w.dir); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", w.dir, err))
			}
		}
		w.stopErr = errors.Join(errs...)
		if w.stopErr != nil {
			w.stopErr = fmt.Errorf("stop test world: %w", w.stopErr)
		}
	})
	return w.stopErr
}

// The world of one mode: starting it, its target clusters and its meter.

package world

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// BenchNamespace is the namespace every workload runs in. It is created and
// warmed up once per world, so that no run pays for a namespace's first use
// (its ServiceAccount, flotilla's member namespace).
const BenchNamespace = "bench"

// Options are what the world of a mode is made of; the bench's flags set
// them.
type Options struct {
	// Members is how many member clusters flotilla forwards to, each with
	// NodesPerCluster kwok nodes; the native host gets as many nodes.
	Members, NodesPerCluster int
	// PeakPods is the most pods at once in one cluster, which every kwok
	// node must be able to hold by itself.
	PeakPods int
	// ClientQPS and ClientBurst limit every controller-manager and
	// scheduler, in all modes alike.
	ClientQPS   float32
	ClientBurst int
	// Pin gives the host side and the members a CPU each (HostCPU,
	// MemberCPU).
	Pin bool
	// NodeArgs are extra flotilla-node arguments; Profile serves pprof from
	// every flotilla-node (ProfilingAddress).
	NodeArgs []string
	Profile  bool
}

// Target is a running world prepared for one mode: where the user creates
// workloads, where flotilla forwards them, and what to measure.
type Target struct {
	Mode  measure.Mode
	World *testworld.World
	Fleet *fleet.Fleet // flotilla mode only
	// User is the cluster the user creates workloads in.
	User *testworld.Cluster
	// Members are the clusters flotilla forwards to (flotilla mode only).
	Members []*testworld.Cluster
	Meter   *measure.Meter
	Logf    func(string, ...any)
	// Once holds measurements taken once per world (idle footprint).
	Once measure.Sample
	// QuietExtra raises measure.QuietWrites for a cluster by name: a host
	// with many flotilla-nodes renewing their leases writes more while
	// quiet (the members scenario).
	QuietExtra map[string]float64
}

// NodeSpecs returns count fake nodes named prefix-1..count, each able to
// hold every pod of a run by itself (pods at once, and some), so that
// capacity never decides a result.
func NodeSpecs(prefix string, count, pods int) []testworld.NodeSpec {
	allocatable := resource.MustParse(strconv.Itoa(max(110, pods+100)))
	specs := make([]testworld.NodeSpec, count)
	for i := range specs {
		specs[i] = testworld.NodeSpec{
			Name:        fmt.Sprintf("%s-%d", prefix, i+1),
			Allocatable: corev1.ResourceList{corev1.ResourcePods: allocatable},
		}
	}
	return specs
}

// Config describes the world mode m needs. The control planes' client
// limits are the same in every mode.
func Config(m measure.Mode, o Options, bin testworld.Bin, dir string, logf func(string, ...any)) testworld.Config {
	cfg := testworld.Config{
		Dir: dir, Bin: &bin, Logf: logf,
		ClientQPS: o.ClientQPS, ClientBurst: o.ClientBurst,
	}
	switch m {
	case measure.ModeNative:
		cfg.HostNodes = NodeSpecs("host-node", o.Members*o.NodesPerCluster, o.PeakPods)
	case measure.ModeDirect:
		cfg.Members = []testworld.ClusterConfig{{Name: "member-1", Nodes: NodeSpecs("member-1-node", o.NodesPerCluster, o.PeakPods)}}
	case measure.ModeFlotilla:
		for i := range o.Members {
			name := fmt.Sprintf("member-%d", i+1)
			cfg.Members = append(cfg.Members, testworld.ClusterConfig{Name: name, Nodes: NodeSpecs(name+"-node", o.NodesPerCluster, o.PeakPods)})
		}
	}
	return cfg
}

// Start starts the world for m, deploys flotilla in flotilla mode and pins
// the processes with o.Pin. The caller stops t.World.
func Start(ctx context.Context, m measure.Mode, o Options, bin testworld.Bin, nodeBinary, dir string, logf func(string, ...any)) (*Target, error) {
	w, err := testworld.Start(ctx, Config(m, o, bin, dir, logf))
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Target, error) {
		if stopErr := w.Stop(); stopErr != nil {
			logf("%v", stopErr)
		}
		return nil, err
	}
	var f *fleet.Fleet
	if m == measure.ModeFlotilla {
		if f, err = deployFleet(ctx, w, o, nodeBinary); err != nil {
			return fail(err)
		}
	}
	t := Attach(m, w, f, logf)
	if o.Pin {
		if err := t.pin(); err != nil {
			return fail(err)
		}
	}
	return t, nil
}

// Attach returns the target of mode m in a world already running, with f
// its flotilla-nodes in flotilla mode, and a meter of what m measures.
func Attach(m measure.Mode, w *testworld.World, f *fleet.Fleet, logf func(string, ...any)) *Target {
	t := &Target{Mode: m, World: w, Fleet: f, Logf: logf, Once: measure.Sample{}}
	switch m {
	case measure.ModeNative:
		t.User = w.Host()
	case measure.ModeDirect:
		t.User = w.Members()[0]
	case measure.ModeFlotilla:
		t.User, t.Members = w.Host(), w.Members()
	}
	t.Meter = t.NewMeter()
	return t
}

// NewMeter returns a meter of what t's mode measures: the cluster the user
// works in natively and directly (in direct mode the world's host is idle
// and not part of it); the host, the members and every flotilla-node with
// flotilla.
func (t *Target) NewMeter() *measure.Meter {
	w := measure.Metered{Clusters: map[string][]*testworld.Cluster{}}
	switch t.Mode {
	case measure.ModeNative:
		w.Clusters[measure.RoleHost] = []*testworld.Cluster{t.User}
	case measure.ModeDirect:
		w.Clusters[measure.RoleMember] = []*testworld.Cluster{t.User}
	case measure.ModeFlotilla:
		w.Clusters[measure.RoleHost] = []*testworld.Cluster{t.World.Host()}
		w.Clusters[measure.RoleMember] = t.Members
		for i, c := range t.Members {
			w.Nodes = append(w.Nodes, measure.Node{Member: c.Name, PID: t.Fleet.Node(c.Name).Pid(), Metrics: MetricsAddress(i)})
		}
	}
	return measure.NewMeter(w)
}

// Quiesce waits until t's world is quiet (measure.Quiesce), at most
// timeout, and records how long that took as quiesce.<scenario>_s.
func (t *Target) Quiesce(ctx context.Context, timeout time.Duration, scenario string, s measure.Sample) error {
	return measure.Quiesce(ctx, t.World.Clusters(), t.QuietExtra, timeout, scenario, s)
}

// MarkLogs notes where every flotilla-node's log ends now; nil without
// flotilla.
func (t *Target) MarkLogs() measure.LogMark {
	if t.Fleet == nil {
		return nil
	}
	var paths []string
	for _, c := range t.Members {
		if p := t.Fleet.Node(c.Name); p != nil {
			paths = append(paths, p.LogPath())
		}
	}
	return measure.MarkLogs(paths)
}

// Profiling returns every flotilla-node's pprof endpoint.
func (t *Target) Profiling() []measure.Endpoint {
	out := make([]measure.Endpoint, len(t.Members))
	for i, m := range t.Members {
		out[i] = measure.Endpoint{Member: m.Name, Address: ProfilingAddress(i)}
	}
	return out
}

// NodeRSS is the RSS of the largest flotilla-node, in MiB.
func (t *Target) NodeRSS() (float64, error) {
	var largest int64
	for _, c := range t.Members {
		ps, err := measure.ReadProc(t.Fleet.Node(c.Name).Pid())
		if err != nil {
			return 0, err
		}
		largest = max(largest, ps.RSSBytes)
	}
	return float64(largest) / (1 << 20), nil
}

// deployFleet runs one flotilla-node per member, each serving its metrics
// (which count its own API requests) and, with o.Profile, pprof on
// loopback ports of its own.
func deployFleet(ctx context.Context, w *testworld.World, o Options, nodeBinary string) (*fleet.Fleet, error) {
	var members []string
	perMember := map[string][]string{}
	for i, m := range w.Members() {
		members = append(members, m.Name)
		perMember[m.Name] = []string{"--metrics-bind-address=" + MetricsAddress(i)}
		if o.Profile {
			perMember[m.Name] = append(perMember[m.Name], "--profiling-address="+ProfilingAddress(i))
		}
	}
	f, err := fleet.DeployWith(ctx, w, nodeBinary, members, perMember, o.NodeArgs...)
	if err != nil {
		return nil, fmt.Errorf("deploy flotilla: %w", err)
	}
	return f, nil
}

// ProfilingAddress is the pprof endpoint of the i-th member's
// flotilla-node, on the loopback device of the world's private network
// namespace.
func ProfilingAddress(i int) string { return "127.0.0.1:" + strconv.Itoa(16060+i) }

// MetricsAddress is the i-th member's flotilla-node's /metrics endpoint.
func MetricsAddress(i int) string { return "127.0.0.1:" + strconv.Itoa(17070+i) }

// CreateNamespace creates namespace ns in c unless it exists and waits for
// its ServiceAccount. It reports whether it created the namespace.
func CreateNamespace(ctx context.Context, c *testworld.Cluster, ns string) (bool, error) {
	client := c.Client()
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	created := err == nil
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create namespace %s in %s: %w", ns, c.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return created, fmt.Errorf("wait for the default ServiceAccount of %s in %s: %w", ns, c.Name, err)
	}
	return created, nil
}

// Dir returns a fresh directory for one invocation's worlds and binaries:
// a timestamped one under keep, or a temporary one when keep is empty.
func Dir(keep string) (string, error) {
	if keep != "" {
		dir := filepath.Join(keep, time.Now().Format("20060102-150405"))
		return dir, os.MkdirAll(dir, 0o755)
	}
	return os.MkdirTemp("", "flotilla-bench-")
}

package main

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

	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// mode is one way of running the same workload.
type mode string

const (
	// modeNative runs the workload in the host cluster on fake nodes of the
	// members' total capacity, without flotilla: the single-cluster baseline.
	modeNative mode = "native"
	// modeDirect runs the workload directly in one member cluster.
	modeDirect mode = "direct"
	// modeFlotilla creates the workload in the host; flotilla forwards its
	// pods through virtual nodes to the members.
	modeFlotilla mode = "flotilla"
)

// allModes is the order the bench measures modes in.
var allModes = []mode{modeNative, modeDirect, modeFlotilla}

// benchNamespace is the namespace every workload runs in. It is created and
// warmed up once per world, so that no run pays for a namespace's first use
// (its ServiceAccount, flotilla's member namespace).
const benchNamespace = "bench"

// CPUs the clusters are pinned to with --pin.
const (
	hostCPU   = 0
	memberCPU = 1
)

// target is a running world prepared for one mode: where the user creates
// workloads, where flotilla forwards them, and what to measure.
type target struct {
	mode  mode
	opts  *options
	world *testworld.World
	fleet *fleet.Fleet // flotilla mode only
	// user is the cluster the user creates workloads in.
	user *testworld.Cluster
	// members are the clusters flotilla forwards to (flotilla mode only).
	members []*testworld.Cluster
	meter   *meter
	logf    func(string, ...any)
	// once holds measurements taken once per world (idle footprint).
	once sample
	// quietExtra raises quietWrites for a cluster by name: a host with
	// many flotilla-nodes renewing their leases writes more while quiet
	// (the members scenario).
	quietExtra map[string]float64
}

// nodeSpecs returns count fake nodes named prefix-1..count, each able to
// hold every pod of a run by itself (pods at once, and some), so that
// capacity never decides a result.
func nodeSpecs(prefix string, count, pods int) []testworld.NodeSpec {
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

// worldConfig describes the world each mode needs. The control planes'
// client limits are the same in every mode.
func worldConfig(m mode, o *options, bin testworld.Bin, dir string, logf func(string, ...any)) testworld.Config {
	cfg := testworld.Config{
		Dir: dir, Bin: &bin, Logf: logf,
		ClientQPS: o.clientQPS, ClientBurst: o.clientBurst,
	}
	pods := peakPods(o)
	switch m {
	case modeNative:
		cfg.HostNodes = nodeSpecs("host-node", o.members*o.nodesPerCluster, pods)
	case modeDirect:
		cfg.Members = []testworld.ClusterConfig{{Name: "member-1", Nodes: nodeSpecs("member-1-node", o.nodesPerCluster, pods)}}
	case modeFlotilla:
		for i := range o.members {
			name := fmt.Sprintf("member-%d", i+1)
			cfg.Members = append(cfg.Members, testworld.ClusterConfig{Name: name, Nodes: nodeSpecs(name+"-node", o.nodesPerCluster, pods)})
		}
	}
	return cfg
}

// startTarget starts the world for m, deploys flotilla in flotilla mode,
// pins the processes with --pin, and prepares the bench namespace. The
// caller stops t.world.
func startTarget(ctx context.Context, m mode, o *options, bin testworld.Bin, nodeBinary, dir string, logf func(string, ...any)) (*target, error) {
	w, err := testworld.Start(ctx, worldConfig(m, o, bin, dir, logf))
	if err != nil {
		return nil, err
	}
	t := &target{mode: m, opts: o, world: w, logf: logf, once: sample{}}
	fail := func(err error) (*target, error) {
		if stopErr := w.Stop(); stopErr != nil {
			logf("%v", stopErr)
		}
		return nil, err
	}
	switch m {
	case modeNative:
		t.user = w.Host()
	case modeDirect:
		t.user = w.Members()[0]
	case modeFlotilla:
		t.user, t.members = w.Host(), w.Members()
		if t.fleet, err = deployFleet(ctx, w, o, nodeBinary); err != nil {
			return fail(err)
		}
	}
	if o.pin {
		if err := t.pin(); err != nil {
			return fail(err)
		}
	}
	t.meter = newMeter(t)
	if err := t.prepareNamespace(ctx); err != nil {
		return fail(err)
	}
	return t, nil
}

// deployFleet runs one flotilla-node per member, each serving its metrics
// (which count its own API requests) and, with --profile-dir, pprof on
// loopback ports of its own.
func deployFleet(ctx context.Context, w *testworld.World, o *options, nodeBinary string) (*fleet.Fleet, error) {
	var members []string
	perMember := map[string][]string{}
	for i, m := range w.Members() {
		members = append(members, m.Name)
		perMember[m.Name] = []string{"--metrics-bind-address=" + metricsAddress(i)}
		if o.profileDir != "" {
			perMember[m.Name] = append(perMember[m.Name], "--profiling-address="+profilingAddress(i))
		}
	}
	f, err := fleet.DeployWith(ctx, w, nodeBinary, members, perMember, o.nodeArgs...)
	if err != nil {
		return nil, fmt.Errorf("deploy flotilla: %w", err)
	}
	return f, nil
}

// profilingAddress is the pprof endpoint of the i-th member's flotilla-node,
// on the loopback device of the world's private network namespace.
func profilingAddress(i int) string { return "127.0.0.1:" + strconv.Itoa(16060+i) }

// metricsAddress is the i-th member's flotilla-node's /metrics endpoint.
func metricsAddress(i int) string { return "127.0.0.1:" + strconv.Itoa(17070+i) }

// clusterProcesses returns the processes a cluster runs, by component.
func clusterProcesses(c *testworld.Cluster) map[string]*testworld.Process {
	out := map[string]*testworld.Process{}
	for _, comp := range []string{testworld.ComponentEtcd, testworld.ComponentAPIServer,
		testworld.ComponentControllerManager, testworld.ComponentScheduler, testworld.ComponentKwok} {
		if p := c.Process(comp); p != nil {
			out[comp] = p
		}
	}
	return out
}

// pin puts the host's processes and flotilla-node on hostCPU and every
// member's on memberCPU. In native and direct mode the measured cluster so
// runs all its processes on one CPU; in flotilla mode the host side and the
// member side each get a CPU of their own, as separate machines would.
func (t *target) pin() error {
	type pinning struct {
		name string
		pid  int
		cpu  int
	}
	var ps []pinning
	for comp, p := range clusterProcesses(t.world.Host()) {
		ps = append(ps, pinning{t.world.Host().Name + "/" + comp, p.Pid(), hostCPU})
	}
	for _, m := range t.world.Members() {
		for comp, p := range clusterProcesses(m) {
			ps = append(ps, pinning{m.Name + "/" + comp, p.Pid(), memberCPU})
		}
		if t.fleet != nil {
			ps = append(ps, pinning{"flotilla-node/" + m.Name, t.fleet.Node(m.Name).Pid(), hostCPU})
		}
	}
	for _, p := range ps {
		n, err := pinProcess(p.pid, p.cpu)
		if err != nil {
			return fmt.Errorf("pin %s: %w", p.name, err)
		}
		t.logf("pinned %s (pid %d, %d threads) to CPU %d", p.name, p.pid, n, p.cpu)
	}
	return nil
}

// prepareNamespace creates the bench namespace where the user works and
// runs a small Deployment to Ready and back to zero so that every cluster
// involved has served the namespace once.
func (t *target) prepareNamespace(ctx context.Context) error {
	if _, err := createNamespace(ctx, t.user, benchNamespace); err != nil {
		return err
	}
	replicas := max(len(t.members), 1) * 2
	if _, err := runDeployment(ctx, t, "warmup", replicas, nil, workloadHooks{}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// createNamespace creates namespace ns in c unless it exists and waits for
// its ServiceAccount. It reports whether it created the namespace.
func createNamespace(ctx context.Context, c *testworld.Cluster, ns string) (bool, error) {
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

// benchDir returns a fresh directory for one invocation's worlds and
// binaries.
func benchDir(keep string) (string, error) {
	if keep != "" {
		dir := filepath.Join(keep, time.Now().Format("20060102-150405"))
		return dir, os.MkdirAll(dir, 0o755)
	}
	return os.MkdirTemp("", "flotilla-bench-")
}

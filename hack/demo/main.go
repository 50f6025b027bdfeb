// Command demo shows flotilla on this machine: a host cluster, three cloud
// member clusters (beijing, hangzhou, shenzhen) each seen as one virtual
// node, and a KubeEdge member split by node label into two virtual nodes
// (ke-beijing-cluster, ke-hangzhou-cluster), with one flotilla-node per
// member and flotilla-policy in the host. shenzhen is behind NAT: its
// flotilla-node runs inside it and only dials out (pull mode), and the
// host reaches its pods' logs and exec through Konnectivity. It applies examples/web.yaml,
// which the host scheduler spreads over the cloud clusters, and
// examples/edge-app.yaml, which a PropagationPolicy divides 2:1 over the
// branches; waits until their pods run in the members; prints where they
// went; and leaves everything running until Ctrl-C, which stops it all and
// exits 0.
//
// With --smoke it checks itself instead of waiting: once the pods are
// placed as README.md shows, it runs the commands it prints for another
// shell, then stops everything and exits 0; any failure exits 1.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"flotilla.io/flotilla/nodeconfig"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// clouds are the member clusters that are one virtual node each.
var clouds = []string{"beijing", "hangzhou", "shenzhen"}

// versions are the members' Kubernetes versions: the host runs the newest,
// each cloud another supported minor, as a real fleet upgraded over time.
var versions = map[string]string{
	"beijing":  testworld.Kubernetes136,
	"hangzhou": testworld.Kubernetes135,
	"shenzhen": testworld.Kubernetes134,
	edgeMember: testworld.Kubernetes137,
}

// pullMember is the cloud member behind NAT, in pull mode.
const pullMember = "shenzhen"

// edgeMember is the KubeEdge member; examples/kubeedge-nodeconfig.yaml
// partitions it by its nodes' location label.
const edgeMember = "kubeedge"

// branches are the locations of edgeMember's nodes, two nodes each.
var branches = []string{"beijing", "hangzhou"}

// settleTimeout bounds the wait for the workloads to run where they should.
const settleTimeout = 3 * time.Minute

// workloads are the examples the demo applies and where their pods must
// run: a unit test keeps this in step with the files.
func workloads() []workload {
	return []workload{
		{Namespace: "default", App: "web", How: "the host scheduler, spread evenly over the cloud clusters, shenzhen in pull mode among them (examples/web.yaml)",
			Want: map[string]int{"beijing": 10, "hangzhou": 10, "shenzhen": 10}},
		{Namespace: "edge", App: "edge-app", How: "PropagationPolicy edge/edge-app, static weights 2:1 over the branches (examples/edge-app.yaml)",
			Want: map[string]int{"ke-beijing-cluster": 4, "ke-hangzhou-cluster": 2}},
	}
}

// smoke makes the demo check itself and stop instead of waiting for Ctrl-C.
var smoke = flag.Bool("smoke", false, "check the placement and the printed commands, then stop and exit (for CI)")

func main() {
	flag.Parse()
	// Ctrl-C and SIGTERM are how the demo is meant to end, so they end it
	// with status 0 once everything is stopped, in this process and in its
	// re-executed child alike.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if testworld.InNetns() {
		os.Exit(testworld.RunInNetns(func() int { return exitCode(ctx, run(ctx)) }))
	}
	restore := takeTerminal()
	code := outside(ctx)
	restore()
	os.Exit(code)
}

// outside builds what the world needs while the module proxy is still
// reachable, then runs the demo in the world's private network namespace.
func outside(ctx context.Context) int {
	fmt.Println("demo: building flotilla and, unless cached, the test world's binaries")
	if _, err := testworld.BinariesOfAll(ctx); err != nil {
		return exitCode(ctx, err)
	}
	dir, err := binDir()
	if err != nil {
		return exitCode(ctx, err)
	}
	if _, err := fleet.BuildNode(ctx, dir); err != nil {
		return exitCode(ctx, err)
	}
	if _, err := fleet.BuildPolicy(ctx, dir); err != nil {
		return exitCode(ctx, err)
	}
	if _, err := fleet.BuildPlugin(ctx, dir); err != nil {
		return exitCode(ctx, err)
	}
	_, code, err := testworld.ReexecInNetns()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	if ctx.Err() != nil && (code == 128+int(syscall.SIGINT) || code == 128+int(syscall.SIGTERM)) {
		// The test world stops itself on a signal and exits with 128+signal;
		// here that is the normal end.
		return 0
	}
	return code
}

// binDir is where flotilla-node and flotilla-policy are built: beside the
// demo's own binary, so that a later run with unchanged sources does not
// link them again, and the child in the network namespace, which cannot
// build, finds them.
func binDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the demo's binary: %w", err)
	}
	return filepath.Dir(exe), nil
}

// exitCode is 0 for success and for any error caused by the stop the user
// asked for, 1 otherwise.
func exitCode(ctx context.Context, err error) int {
	if err == nil || ctx.Err() != nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "demo:", err)
	return 1
}

func run(ctx context.Context) error {
	logf := func(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }

	root, err := testworld.RepoRoot()
	if err != nil {
		return err
	}
	bin, err := testworld.Binaries(ctx)
	if err != nil {
		return err
	}
	cfg := testworld.Config{Bin: &bin, Logf: logf, Konnectivity: true}
	for _, name := range clouds {
		cfg.Members = append(cfg.Members, testworld.ClusterConfig{Name: name, BehindNAT: name == pullMember, KubernetesVersion: versions[name], Nodes: []testworld.NodeSpec{
			{Name: name + "-node-1"}, {Name: name + "-node-2"},
		}})
	}
	edge := testworld.ClusterConfig{Name: edgeMember, KubernetesVersion: versions[edgeMember]}
	for _, loc := range branches {
		for i := 1; i <= 2; i++ {
			edge.Nodes = append(edge.Nodes, testworld.NodeSpec{
				Name: fmt.Sprintf("%s-edge-%d", loc, i), Labels: map[string]string{"location": loc}})
		}
	}
	cfg.Members = append(cfg.Members, edge)
	w, err := testworld.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer w.Stop()
	dir := w.Dir() // removed by Stop, also on Ctrl-C
	flotillaBin, err := binDir()
	if err != nil {
		return err
	}
	nodeBin, policyBin := filepath.Join(flotillaBin, "flotilla-node"), filepath.Join(flotillaBin, "flotilla-policy")
	f, err := fleet.DeployOnly(ctx, w, nodeBin, clouds)
	if err != nil {
		return err
	}
	partitions, err := startEdge(ctx, f, filepath.Join(root, "examples", "kubeedge-nodeconfig.yaml"))
	if err != nil {
		return err
	}
	if _, err := f.StartPolicy(ctx, policyBin); err != nil {
		return err
	}
	// metrics-server in every cluster, so that `kubectl top` works in the
	// host through the virtual nodes as it does in each member.
	if err := w.StartMetricsServers(ctx); err != nil {
		return err
	}

	kubeconfig := w.Host().KubeconfigPath
	// kubectl finds the kubectl-flotilla plugin beside the demo's binary.
	path := flotillaBin + string(os.PathListSeparator) + os.Getenv("PATH")
	kubectlIn := func(c *testworld.Cluster, args ...string) error {
		cmd := exec.CommandContext(ctx, bin.Kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath, "PATH="+path)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	for _, file := range []string{"web.yaml", "edge-app.yaml"} {
		if err := kubectlIn(w.Host(), "apply", "-f", filepath.Join(root, "examples", file)); err != nil {
			return err
		}
	}

	logf("waiting for the pods to run in the member clusters")
	var nodes []virtualNode
	for _, c := range clouds {
		nodes = append(nodes, virtualNode{Name: c, Member: c})
	}
	for _, p := range partitions {
		nodes = append(nodes, virtualNode{Name: p, Member: edgeMember})
	}
	want := workloads()
	got, err := waitPlacement(ctx, w, want, settleTimeout)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Println()
			printPlacement(os.Stdout, want, got, nodes)
		}
		return err
	}
	// What a newcomer should see, each under a line that says why.
	for _, step := range []struct {
		title string
		in    *testworld.Cluster
		args  []string
	}{
		{"The host's nodes: one virtual node per cloud member cluster, one per branch of the KubeEdge member.",
			w.Host(), []string{"get", "nodes"}},
		{"The member clusters as `kubectl flotilla clusters` (the plugin) lists them: shenzhen is behind NAT, its flotilla-node runs inside it (pull).",
			w.Host(), []string{"flotilla", "clusters"}},
		{"The KubeEdge member's own nodes: examples/kubeedge-nodeconfig.yaml partitions them by location.",
			w.Member(edgeMember), []string{"get", "nodes", "-L", "location"}},
		{"The policy in the host, reconciled by flotilla-policy.",
			w.Host(), []string{"get", "propagationpolicies", "-A"}},
		{"In the KubeEdge member, each branch's pods run in a namespace of its own, on that branch's nodes.",
			w.Member(edgeMember), []string{"get", "pods", "-A", "-o", "wide"}},
	} {
		fmt.Printf("\n%s\n\n", step.title)
		if err := kubectlIn(step.in, step.args...); err != nil {
			return err
		}
	}
	fmt.Println()
	printPlacement(os.Stdout, want, got, nodes)

	// The clusters listen inside this process's private network namespace;
	// the wrapper enters it so kubectl from any shell can reach them.
	// The wrapper also puts the plugin on PATH. A member behind NAT is
	// reached only from inside its own network: it has a wrapper of its own.
	wrapperFor := func(name, netns string) (string, error) {
		wrapper := filepath.Join(dir, name)
		script := fmt.Sprintf("#!/bin/sh\nPATH=%s exec nsenter --net=%s %s \"$@\"\n", path, netns, bin.Kubectl)
		return wrapper, os.WriteFile(wrapper, []byte(script), 0o755)
	}
	wrapper, err := wrapperFor("kubectl", fmt.Sprintf("/proc/%d/ns/net", os.Getpid()))
	if err != nil {
		return err
	}
	// The commands a user pastes into another shell, each with what its
	// output must mention when the smoke run checks it.
	type tryCommand struct{ member, line, mentions string }
	try := []tryCommand{
		{"", fmt.Sprintf("KUBECONFIG=%s %s get pods -A -o wide", kubeconfig, wrapper), "ke-hangzhou-cluster"},
		{"", fmt.Sprintf("KUBECONFIG=%s %s flotilla clusters", kubeconfig, wrapper), pullMember},
	}
	for _, m := range w.Members() {
		in := wrapper
		if s := m.Site(); s != nil {
			if in, err = wrapperFor(m.Name+"-kubectl", s.NetnsPath()); err != nil {
				return err
			}
		}
		try = append(try, tryCommand{m.Name, fmt.Sprintf("KUBECONFIG=%s %s get pods -A -o wide", m.KubeconfigPath, in), "Running"})
	}
	fmt.Printf("\nflotilla is ready. From another shell (as root):\n\n")
	for i, c := range try {
		switch {
		case c.member == "":
			fmt.Printf("  %s\n", c.line)
		default:
			if try[i-1].member == "" {
				fmt.Println()
			}
			fmt.Printf("  member %-9s %s\n", c.member, c.line)
		}
	}
	if *smoke {
		for _, c := range try {
			if err := trySmoke(ctx, c.line, c.mentions); err != nil {
				return err
			}
		}
		logf("smoke: placement as shown and %d printed commands work; stopping", len(try))
		return nil
	}
	fmt.Printf("\nPress Ctrl-C to stop everything.\n")
	<-ctx.Done()
	logf("stopping")
	return nil
}

// startEdge starts the KubeEdge member's flotilla-node with the partitions
// of the example configuration, each on a kubelet port of the world's, and
// waits until their virtual nodes are Ready. It returns their names.
func startEdge(ctx context.Context, f *fleet.Fleet, example string) ([]string, error) {
	b, err := os.ReadFile(example)
	if err != nil {
		return nil, err
	}
	nc, err := nodeconfig.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", example, err)
	}
	var names []string
	for i := range nc.VirtualClusters {
		port, err := f.World.FreePort()
		if err != nil {
			return nil, err
		}
		nc.VirtualClusters[i].KubeletPort = int32(port)
		names = append(names, nc.VirtualClusters[i].Name)
	}
	out, err := yaml.Marshal(nc)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(f.World.Dir(), "kubeedge-nodeconfig.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return nil, err
	}
	if _, err := f.StartNode(edgeMember, "--config="+path); err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := f.WaitVirtualNodeReady(ctx, edgeMember, n, 2*time.Minute); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// trySmoke runs one printed command line as a shell would and checks that
// it succeeds and that its output mentions what it must.
func trySmoke(ctx context.Context, line, mentions string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("smoke: %s: %w\n%s", line, err, out.String())
	}
	if !strings.Contains(out.String(), mentions) {
		return fmt.Errorf("smoke: %s: output does not mention %q:\n%s", line, mentions, out.String())
	}
	return nil
}

// Package e2e tests flotilla end to end against real clusters: a host and
// three members, each with its own etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, the members' nodes simulated
// by kwok, and one flotilla-node process per member running with exactly
// the ClusterRoles in config/rbac.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
	"flotilla.io/flotilla/test/tools"
)

// members are the member clusters every test can use; each has two kwok nodes.
var members = []string{"beijing", "hangzhou", "shenzhen"}

// topology is where each member runs: its nodes carry the region and zone
// labels (which flotilla-node advertises, being uniform across them), its
// flotilla-node names the provider. Policies select clusters by them.
// Each runs another Kubernetes minor, the host the newest, so that every
// test crosses versions.
var topology = map[string]struct{ region, zone, provider, version string }{
	"beijing":  {"cn-north", "cn-north-1", "aliyun", testworld.Kubernetes136},
	"hangzhou": {"cn-east", "cn-east-1", "aliyun", testworld.Kubernetes135},
	"shenzhen": {"cn-south", "cn-south-1", "tencent", testworld.Kubernetes134},
}

// env is the running fleet, shared by the tests of this package.
var env *fleet.Fleet

func TestMain(m *testing.M) {
	// -short is the unit run: no root, no built binaries, no network namespace.
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	// Build (or find cached) binaries and tools (helm) before entering the
	// private network namespace: inside it the module proxy is out of reach.
	if !testworld.InNetns() {
		if err := fleet.Prepare(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(1)
		}
		if _, err := tools.Build(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(1)
		}
		// The data-plane test runs beijing's kube-proxy; inside the world's
		// network namespace there is no module proxy to build it from.
		if _, err := testworld.KubeProxyOf(context.Background(), topology["beijing"].version); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(1)
		}
	}
	os.Exit(testworld.RunInNetns(func() int { return run(m) }))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Printf("e2e: "+format+"\n", args...) }

	cfg := testworld.Config{Logf: logf, KubernetesVersion: testworld.Kubernetes137, KeepDir: os.Getenv("FLOTILLA_E2E_KEEP") != ""}
	memberArgs := map[string][]string{}
	for _, name := range members {
		where := topology[name]
		labels := map[string]string{corev1.LabelTopologyRegion: where.region, corev1.LabelTopologyZone: where.zone}
		cfg.Members = append(cfg.Members, testworld.ClusterConfig{Name: name, KubernetesVersion: where.version, Nodes: []testworld.NodeSpec{
			{Name: name + "-node-1", Labels: labels}, {Name: name + "-node-2", Labels: labels},
		}})
		memberArgs[name] = []string{"--provider=" + where.provider}
	}
	edge := testworld.ClusterConfig{Name: edgeMember, KubernetesVersion: testworld.Kubernetes137}
	for _, n := range edgeNodes() {
		edge.Nodes = append(edge.Nodes, testworld.NodeSpec{Name: n.name, Labels: n.labels})
	}
	cfg.Members = append(cfg.Members, edge)
	started := time.Now()
	w, err := testworld.Start(ctx, cfg)
	if err != nil {
		logf("start test world: %v", err)
		return 1
	}
	defer w.Stop()
	logf("test world (host + %d members) started in %s; files in %s", len(cfg.Members), time.Since(started).Round(time.Millisecond), w.Dir())
	bin, err := fleet.BuildNode(ctx, w.Dir())
	if err != nil {
		logf("%v", err)
		return 1
	}
	started = time.Now()
	// The edge member's flotilla-node is started by the test that
	// partitions it.
	env, err = fleet.DeployWith(ctx, w, bin, members, memberArgs, "--log-level=debug")
	if err != nil {
		logf("deploy flotilla: %v", err)
		return 1
	}
	logf("flotilla-node x%d Ready in %s", len(members), time.Since(started).Round(time.Millisecond))
	code := m.Run()
	if code != 0 {
		w.KeepFiles()
		logf("tests failed: the world's logs stay in %s (a run a day later removes them)", w.Dir())
	}
	return code
}

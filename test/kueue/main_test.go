// Package kueue tests Kueue (sigs.k8s.io/kueue) in a flotilla host end to
// end: a host with Kueue's controller manager and flotilla-policy, and two
// push members whose virtual nodes are Kueue ResourceFlavors, set up with
// the manifests of docs/kueue.md.
package kueue

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// The members: beijing has two 4-cpu nodes, hangzhou one 8-cpu node. Both
// virtual nodes show 8 cpu, the quota docs/kueue.md gives each flavor, but
// only hangzhou can run a pod of more than 4 cpu.
var memberNodes = map[string][]string{
	"beijing":  {"4", "4"},
	"hangzhou": {"8"},
}

// members lists memberNodes' keys in the order the ClusterQueue tries them.
var members = []string{"beijing", "hangzhou"}

// env is the running fleet, shared by the tests of this package.
var env *fleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("kueue: skipped in -short mode")
		os.Exit(0)
	}
	// Build (or find cached) binaries before entering the private network
	// namespace: inside it the module proxy is out of reach. Kueue is built
	// only on request.
	os.Setenv("FLOTILLA_KUEUE", "1")
	if !testworld.InNetns() {
		if err := fleet.Prepare(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "kueue:", err)
			os.Exit(1)
		}
	}
	os.Exit(testworld.RunInNetns(func() int { return run(m) }))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Printf("kueue: "+format+"\n", args...) }

	// Kueue runs where its users' hosts do, one minor behind the newest;
	// the members are one minor apart around it.
	cfg := testworld.Config{Logf: logf, KubernetesVersion: testworld.Kubernetes136, KeepDir: os.Getenv("FLOTILLA_E2E_KEEP") != ""}
	for i, name := range members {
		c := testworld.ClusterConfig{Name: name, KubernetesVersion: testworld.KubernetesVersions[i%len(testworld.KubernetesVersions)]}
		for i, cpu := range memberNodes[name] {
			c.Nodes = append(c.Nodes, testworld.NodeSpec{
				Name:        fmt.Sprintf("%s-node-%d", name, i+1),
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("32Gi")},
			})
		}
		cfg.Members = append(cfg.Members, c)
	}
	started := time.Now()
	w, err := testworld.Start(ctx, cfg)
	if err != nil {
		logf("start test world: %v", err)
		return 1
	}
	defer w.Stop()
	code := 1
	defer func() {
		if code != 0 {
			w.KeepFiles()
			logf("tests failed: the world's logs stay in %s (a run a day later removes them)", w.Dir())
		}
	}()
	bin, err := fleet.BuildNode(ctx, w.Dir())
	if err != nil {
		logf("%v", err)
		return 1
	}
	if env, err = fleet.DeployWith(ctx, w, bin, members, nil); err != nil {
		logf("deploy flotilla: %v", err)
		return 1
	}
	// flotilla-policy's fit gate is half of what TestKueueThenFitGate
	// shows.
	policy, err := fleet.BuildPolicy(ctx, w.Dir())
	if err != nil {
		logf("%v", err)
		return 1
	}
	if _, err := env.StartPolicy(ctx, policy); err != nil {
		logf("start flotilla-policy: %v", err)
		return 1
	}
	if _, err := w.StartKueue(ctx); err != nil {
		logf("start kueue: %v", err)
		return 1
	}
	if err := applyGuideClusterObjects(ctx); err != nil {
		logf("%v", err)
		return 1
	}
	logf("world (host + %d members), flotilla and Kueue ready in %s; files in %s", len(members), time.Since(started).Round(time.Millisecond), w.Dir())
	code = m.Run()
	return code
}

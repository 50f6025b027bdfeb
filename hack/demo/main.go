// Command demo starts a host cluster and three member clusters on this
// machine, runs one flotilla-node per member, applies examples/web.yaml to
// the host and shows its 30 pods running across the three virtual nodes. It
// leaves everything running until Ctrl-C.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

var members = []string{"beijing", "hangzhou", "shenzhen"}

func main() {
	// Build (or find cached) binaries before entering the private network
	// namespace: inside it the module proxy is out of reach.
	if !testworld.InNetns() {
		fmt.Println("demo: building the test world's binaries (the first time takes about 10 minutes)")
		if err := fleet.Prepare(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(1)
		}
	}
	os.Exit(testworld.RunInNetns(func() int {
		if err := run(); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			return 1
		}
		return 0
	}))
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }

	root, err := testworld.RepoRoot()
	if err != nil {
		return err
	}
	bin, err := testworld.Binaries(ctx)
	if err != nil {
		return err
	}
	cfg := testworld.Config{Bin: &bin, Logf: logf}
	for _, name := range members {
		cfg.Members = append(cfg.Members, testworld.ClusterConfig{Name: name, Nodes: []testworld.NodeSpec{
			{Name: name + "-node-1"}, {Name: name + "-node-2"},
		}})
	}
	w, err := testworld.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer w.Stop()
	dir := w.Dir() // removed by Stop, also on Ctrl-C
	nodeBin, err := fleet.BuildNode(ctx, dir)
	if err != nil {
		return err
	}
	if _, err := fleet.Deploy(ctx, w, nodeBin); err != nil {
		return err
	}
	// metrics-server in every cluster, so that `kubectl top` works in the
	// host through the virtual nodes as it does in each member.
	if err := w.StartMetricsServers(ctx); err != nil {
		return err
	}

	kubeconfig := w.Host().KubeconfigPath
	kubectl := func(args ...string) error {
		cmd := exec.CommandContext(ctx, bin.Kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	if err := kubectl("apply", "-f", filepath.Join(root, "examples", "web.yaml")); err != nil {
		return err
	}
	logf("waiting for 30 pods to run across the member clusters")
	host := w.Host().Client()
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := host.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 30, nil
	})
	if err != nil {
		return fmt.Errorf("pods did not all run: %w", err)
	}
	fmt.Println()
	if err := kubectl("get", "nodes", "-o", "wide"); err != nil {
		return err
	}
	fmt.Println()
	if err := kubectl("get", "pods", "-o", "wide"); err != nil {
		return err
	}

	// The clusters listen inside this process's private network namespace;
	// the wrapper enters it so kubectl from any shell can reach them.
	wrapper := filepath.Join(dir, "kubectl")
	script := fmt.Sprintf("#!/bin/sh\nexec nsenter --net=/proc/%d/ns/net %s \"$@\"\n", os.Getpid(), bin.Kubectl)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return err
	}
	fmt.Printf("\nflotilla is running. From another shell (as root):\n\n")
	fmt.Printf("  KUBECONFIG=%s %s get pods -o wide\n\n", kubeconfig, wrapper)
	for _, m := range w.Members() {
		fmt.Printf("  member %-9s KUBECONFIG=%s %s get pods -A -o wide\n", m.Name, m.KubeconfigPath, wrapper)
	}
	fmt.Printf("\nPress Ctrl-C to stop everything.\n")
	<-ctx.Done()
	logf("stopping")
	return nil
}

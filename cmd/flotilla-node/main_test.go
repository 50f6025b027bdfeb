package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/legacyregistry"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/provider"
)

// TestKubeletWithoutResourceMetrics: a virtual node whose stats cannot be
// served stops flotilla-node with the reason at start-up, instead of
// serving a kubelet endpoint whose /stats/summary would panic.
func TestKubeletWithoutResourceMetrics(t *testing.T) {
	host, member := fake.NewClientset(), fake.NewClientset()
	hostInformers := kube.NewFactory(host)
	p, err := provider.New(provider.Config{
		NodeName: "vn", Installation: "inst",
		HostPods: hostInformers.Pods(), HostClient: host, HostInformers: hostInformers,
		Recorder: &record.FakeRecorder{}, MemberClient: member, MemberInformers: kube.NewFactory(member),
	})
	if err != nil {
		t.Fatal(err)
	}
	build := kubelet("inst", metricsfake.NewSimpleClientset())
	if k, err := build(v1alpha1.VirtualCluster{Name: "vn"}, p); err != nil || k == nil {
		t.Fatalf("kubelet of a named virtual cluster: %v, %v", k, err)
	}
	if k, err := build(v1alpha1.VirtualCluster{}, p); err == nil {
		t.Fatalf("kubelet without resource metrics served: %#v", k)
	}
}

// TestConfigWithOnlyPlacement: a --config that lists no virtual clusters
// only tunes placement; the node flags still describe the whole-cluster
// node. With virtual clusters, the node flags are refused.
func TestConfigWithOnlyPlacement(t *testing.T) {
	dir := t.TempDir()
	only := filepath.Join(dir, "placement.yaml")
	split := filepath.Join(dir, "split.yaml")
	if err := os.WriteFile(only, []byte("apiVersion: flotilla.io/v1alpha1\nkind: NodeConfig\nplacement: {handBackAfter: 5s, growable: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(split, []byte("apiVersion: flotilla.io/v1alpha1\nkind: NodeConfig\nvirtualClusters: [{name: a}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vcs, err := loadVirtualClusters(&options{configFile: only, clusterName: "shenzhen", listenPort: 10250, providerName: "tencent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vcs) != 1 || vcs[0].Name != "shenzhen" || vcs[0].Provider != "tencent" || !*vcs[0].Placement.Growable || vcs[0].Placement.HandBackAfter.Duration != 5*time.Second {
		t.Errorf("virtual clusters %+v", vcs)
	}
	if _, err := loadVirtualClusters(&options{configFile: split, clusterName: "m", listenPort: 10250, providerName: "tencent"}); err == nil {
		t.Error("--provider with virtual clusters in --config was accepted")
	}
}

// TestPullModeFlags: flotilla-node runs in the host (member kubeconfig
// given) or in the member (host kubeconfig given), never with both
// in-cluster, which would make a cluster a member of itself.
func TestPullModeFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"--cluster-name=far", "--member-kubeconfig=m"}},
		{args: []string{"--cluster-name=far", "--host-kubeconfig=h"}},
		{args: []string{"--cluster-name=far", "--host-kubeconfig=h", "--member-kubeconfig=m"}},
		{args: []string{"--cluster-name=far"}, wantErr: "--member-kubeconfig or --host-kubeconfig is required"},
	} {
		_, err := parseFlags(tc.args)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestWorkQueueMetrics: flotilla-node's named work queues report the
// documented workqueue_* series through the registry it serves; they
// did only while a dependency happened to set client-go's metrics
// provider.
func TestWorkQueueMetrics(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "metrics-test"})
	defer q.ShutDown()
	q.Add("a")
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "workqueue_adds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "metrics-test" && m.GetCounter().GetValue() == 1 {
					return
				}
			}
		}
	}
	t.Error("no workqueue_adds_total{name=metrics-test} 1 in the served registry")
}

// TestMetricsServerStopsWithoutSignal: when the virtual nodes end with an
// error and no signal has come, flotilla-node exits with that error; it
// must not wait for the metrics server, which would stop only on a signal.
func TestMetricsServerStopsWithoutSignal(t *testing.T) {
	stop := serveMetrics(context.Background(), "127.0.0.1:0", prometheus.NewRegistry())
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the metrics server did not stop within 10s of being asked, with no signal")
	}
}

package main

import (
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/provider"
)

// TestKubeletWithoutResourceMetrics: a virtual node whose stats cannot be
// served stops flotilla-node with the reason at start-up, instead of
// serving a kubelet endpoint whose /stats/summary would panic.
func TestKubeletWithoutResourceMetrics(t *testing.T) {
	host, member := fake.NewClientset(), fake.NewClientset()
	hostInformers := informers.NewSharedInformerFactory(host, 0)
	p, err := provider.New(provider.Config{
		NodeName: "vn", Installation: "inst",
		HostPods: hostInformers.Core().V1().Pods(), HostClient: host, HostInformers: hostInformers,
		Recorder: &record.FakeRecorder{}, MemberClient: member, MemberInformers: informers.NewSharedInformerFactory(member, 0),
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

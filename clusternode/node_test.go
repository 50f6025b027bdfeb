package clusternode

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

// linuxAMD64 labels every member node of these tests alike.
var linuxAMD64 = map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}

// forwarded labels a member pod as forwarded by virtual node beijing of
// installation host-1.
var forwarded = map[string]string{wellknown.ClusterLabel: "beijing", wellknown.InstallationLabel: "host-1"}

func TestAllocatable(t *testing.T) {
	cases := map[string]struct {
		nodes    []*corev1.Node
		pods     []*corev1.Pod
		selector labels.Selector
		want     map[corev1.ResourceName]string
	}{
		"sum of ready schedulable nodes": {
			nodes: []*corev1.Node{
				builder.Node("a").Labels(linuxAMD64).CPU("4").Memory("8Gi").Pods("110").Ready().Obj(),
				builder.Node("b").Labels(linuxAMD64).CPU("2").Memory("4Gi").Pods("110").Ready().Obj(),
				builder.Node("c").Labels(linuxAMD64).CPU("8").Memory("8Gi").Pods("110").NotReady().Obj(),
				builder.Node("d").Labels(linuxAMD64).CPU("8").Memory("8Gi").Pods("110").Ready().Unschedulable().Obj(),
			},
			want: map[corev1.ResourceName]string{"cpu": "6", "memory": "12Gi", "pods": "220"},
		},
		"unforwarded pods are subtracted, forwarded and finished pods are not": {
			nodes: []*corev1.Node{builder.Node("a").Labels(linuxAMD64).CPU("4").Memory("8Gi").Pods("110").Ready().Obj()},
			pods: []*corev1.Pod{
				builder.Pod("local").Node("a").CPU("500m").Memory("1Gi").Phase(corev1.PodRunning).Obj(),
				builder.Pod("forwarded").Node("a").CPU("1").Memory("1Gi").Labels(forwarded).Phase(corev1.PodRunning).Obj(),
				builder.Pod("done").Node("a").CPU("1").Memory("1Gi").Phase(corev1.PodSucceeded).Obj(),
				builder.Pod("on-cordoned-node").Node("x").CPU("1").Memory("1Gi").Phase(corev1.PodRunning).Obj(),
				builder.Pod("unscheduled").CPU("1").Memory("1Gi").Phase(corev1.PodPending).Obj(),
			},
			want: map[corev1.ResourceName]string{"cpu": "3500m", "memory": "7Gi", "pods": "109"},
		},
		"pods another installation forwarded count against us": {
			nodes: []*corev1.Node{builder.Node("a").Labels(linuxAMD64).CPU("4").Memory("8Gi").Pods("110").Ready().Obj()},
			pods: []*corev1.Pod{
				builder.Pod("theirs").Node("a").CPU("1").Memory("1Gi").Labels(forwarded).Label(wellknown.InstallationLabel, "other-host").Phase(corev1.PodRunning).Obj(),
			},
			want: map[corev1.ResourceName]string{"cpu": "3", "memory": "7Gi", "pods": "109"},
		},
		"partition selector": {
			nodes: []*corev1.Node{
				builder.Node("a").Labels(linuxAMD64).Label("location", "beijing").CPU("4").Memory("8Gi").Pods("110").Ready().Obj(),
				builder.Node("b").Labels(linuxAMD64).Label("location", "hangzhou").CPU("2").Memory("4Gi").Pods("110").Ready().Obj(),
			},
			selector: labels.SelectorFromSet(labels.Set{"location": "beijing"}),
			want:     map[corev1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "110"},
		},
		"never below zero": {
			nodes: []*corev1.Node{builder.Node("a").Labels(linuxAMD64).CPU("1").Memory("1Gi").Pods("1").Ready().Obj()},
			pods: []*corev1.Pod{
				builder.Pod("p1").Node("a").CPU("2").Memory("2Gi").Phase(corev1.PodRunning).Obj(),
				builder.Pod("p2").Node("a").CPU("0").Memory("0").Phase(corev1.PodRunning).Obj(),
			},
			want: map[corev1.ResourceName]string{"cpu": "0", "memory": "0", "pods": "0"},
		},
		"no eligible nodes": {
			nodes: []*corev1.Node{builder.Node("a").Labels(linuxAMD64).CPU("1").Memory("1Gi").Pods("1").NotReady().Obj()},
			want:  map[corev1.ResourceName]string{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Allocatable(tc.nodes, tc.pods, tc.selector, Config{Name: "beijing", Installation: "host-1"}.Owner())
			gotS := map[corev1.ResourceName]string{}
			for k, q := range got {
				if q.IsZero() {
					gotS[k] = "0"
				} else {
					gotS[k] = q.String()
				}
			}
			if d := cmp.Diff(tc.want, gotS); d != "" {
				t.Errorf("Allocatable (-want +got):\n%s", d)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	cfg := Config{Name: "beijing", InternalIP: "10.250.1.1", KubeletPort: 10250, KubeletVersion: "v1.35.4", Provider: "onprem",
		Labels: map[string]string{"team": "edge", wellknown.ClusterLabel: "spoofed"}}
	snap := Snapshot{
		Nodes: []*corev1.Node{
			builder.Node("a").Labels(linuxAMD64).Label("topology.kubernetes.io/zone", "z1").CPU("4").Memory("8Gi").Pods("110").Ready().Obj(),
			builder.Node("b").Labels(linuxAMD64).Label("topology.kubernetes.io/zone", "z2").CPU("4").Memory("8Gi").Pods("110").Ready().Obj(),
		},
		Reachable: true,
	}
	t0 := time.Unix(1000, 0)
	n := Build(cfg, snap, nil, t0)
	wantLabels := map[string]string{
		"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", // uniform across member nodes
		"type": "virtual-kubelet", "kubernetes.io/role": "agent", "kubernetes.io/hostname": "beijing",
		wellknown.ClusterLabel: "beijing", wellknown.ProviderLabel: "onprem", "team": "edge",
	}
	if d := cmp.Diff(wantLabels, n.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if d := cmp.Diff(DefaultTaints(), n.Spec.Taints); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	if q := n.Status.Allocatable[corev1.ResourceCPU]; q.String() != "8" {
		t.Errorf("allocatable cpu = %s", q.String())
	}
	if n.Status.Addresses[0].Address != "10.250.1.1" || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("addresses/endpoint = %+v %+v", n.Status.Addresses, n.Status.DaemonEndpoints)
	}
	ready := n.Status.Conditions[0]
	if ready.Type != corev1.NodeReady || ready.Status != corev1.ConditionTrue {
		t.Fatalf("ready = %+v", ready)
	}

	// The member becomes unreachable: Ready flips, with a transition time.
	t1 := t0.Add(time.Minute)
	down := Build(cfg, Snapshot{Nodes: snap.Nodes, Reachable: false, Message: "connection refused"}, n, t1)
	r := down.Status.Conditions[0]
	if r.Status != corev1.ConditionFalse || r.Reason != wellknown.ReasonMemberUnreachable || !r.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("ready after outage = %+v", r)
	}
	// Pressure conditions did not change, so their transition time is kept.
	if !down.Status.Conditions[1].LastTransitionTime.Time.Equal(t0) {
		t.Errorf("unchanged condition transition time moved: %v", down.Status.Conditions[1].LastTransitionTime)
	}
	if sameNode(n, down) {
		t.Error("sameNode ignores the Ready flip")
	}
	if !sameNode(n, Build(cfg, snap, n, t1)) {
		t.Error("sameNode sees a change where only heartbeat times differ")
	}
}

// TestBuildPublishesTheSlicesNodes: the virtual node carries a model of its
// own member nodes only, in which forwarded pods count where they run (the
// sum leaves them to the host scheduler; a node's free room does not).
func TestBuildPublishesTheSlicesNodes(t *testing.T) {
	cfg := Config{Name: "beijing", Installation: "host-1", Selector: labels.SelectorFromSet(labels.Set{"location": "beijing"})}
	snap := Snapshot{
		Nodes: []*corev1.Node{
			builder.Node("bj-1").Labels(linuxAMD64).Label("location", "beijing").CPU("32").Memory("64Gi").Pods("110").Ready().Obj(),
			builder.Node("bj-2").Labels(linuxAMD64).Label("location", "beijing").CPU("32").Memory("64Gi").Pods("110").Ready().Obj(),
			builder.Node("hz-1").Labels(linuxAMD64).Label("location", "hangzhou").CPU("64").Memory("64Gi").Pods("110").Ready().Obj(),
		},
		Pods: []*corev1.Pod{
			builder.Pod("mine").Node("bj-1").CPU("20").Memory("1Gi").Labels(forwarded).Phase(corev1.PodRunning).Obj(),
			builder.Pod("theirs").Node("bj-2").CPU("20").Memory("1Gi").Phase(corev1.PodRunning).Obj(),
		},
		Reachable: true,
	}
	n := Build(cfg, snap, nil, time.Now())
	c, err := fit.NewCluster(n)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model == nil {
		t.Fatal("the virtual node publishes no model")
	}
	if got := c.Model.Groups[0].Largest[0]; got != 12000 {
		t.Errorf("largest free cpu on a beijing node = %dm, want 12000m (the hangzhou node is not in this slice)", got)
	}
	if v := c.Check(fit.DemandOf(builder.Pod("big").CPU("20").Memory("1Gi").Obj())); v.Fits {
		t.Errorf("a 20-cpu pod fits a slice whose nodes have 12 free each: %+v", v)
	}
	if got := n.Status.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("44")) != 0 {
		t.Errorf("allocatable cpu = %s, want 44 (the sum, less the pod flotilla did not forward)", got.String())
	}
	// Another forwarded pod bound leaves the sum alone but not the
	// nodes: the node must be published again.
	snap.Pods = append(snap.Pods, builder.Pod("mine-2").Node("bj-2").CPU("4").Memory("1Gi").Labels(forwarded).Phase(corev1.PodRunning).Obj())
	again := Build(cfg, snap, n, time.Now())
	if !equality.Semantic.DeepEqual(again.Status.Allocatable, n.Status.Allocatable) {
		t.Fatal("a forwarded pod changed the sum")
	}
	if sameNode(n, again) {
		t.Error("a forwarded pod bound on a member node leaves the published node as it was")
	}
}

// TestBuildPublishesPreemptibleRoom: the room the host's preemption can
// make for a higher-priority pod is what the pods this virtual node
// forwarded hold; the member's own pods of lower priority add the room
// only the member's scheduler can make.
func TestBuildPublishesPreemptibleRoom(t *testing.T) {
	cfg := Config{Name: "beijing", Installation: "host-1"}
	snap := Snapshot{
		Nodes: []*corev1.Node{
			builder.Node("bj-1").Labels(linuxAMD64).CPU("32").Memory("64Gi").Pods("110").Ready().Obj(),
			builder.Node("bj-2").Labels(linuxAMD64).CPU("32").Memory("64Gi").Pods("110").Ready().Obj(),
		},
		Pods: []*corev1.Pod{
			builder.Pod("mine").Node("bj-1").CPU("10").Labels(forwarded).Priority("low", 10).Phase(corev1.PodRunning).Obj(),
			builder.Pod("theirs-1").Node("bj-1").CPU("15").Priority("low", 10).Phase(corev1.PodRunning).Obj(),
			builder.Pod("theirs-2").Node("bj-2").CPU("30").Priority("low", 10).Phase(corev1.PodRunning).Obj(),
		},
		Reachable: true,
	}
	c, err := fit.NewCluster(Build(cfg, snap, nil, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	v := c.Check(fit.DemandOf(builder.Pod("high").CPU("15").Priority("high", 1000).Obj()))
	if v.Fits || !v.Preempting {
		t.Errorf("a 15-cpu pod of priority 1000: %+v, want it to fit by preempting on bj-1", v)
	}
	if v := c.Check(fit.DemandOf(builder.Pod("high").CPU("20").Priority("high", 1000).Obj())); v.Preempting {
		t.Errorf("a 20-cpu pod fits by preempting: %+v, but preempting makes 17 cpu on bj-1, and the member's own pods on bj-2 are not the host's to preempt", v)
	} else if !v.MemberPreempting {
		t.Errorf("a 20-cpu pod: %+v, want it to fit by the member's scheduler preempting its own pods too", v)
	}
	if v := c.Check(fit.DemandOf(builder.Pod("high").CPU("20").Priority("low", 10).Obj())); v.MemberPreempting {
		t.Errorf("a 20-cpu pod of the same priority as every pod there fits by preempting: %+v", v)
	}
}

package clusternode

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/wellknown"
)

type nodeOpt func(*corev1.Node)

func mkNode(name, cpu, mem, pods string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse(pods),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func notReady(n *corev1.Node)   { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func cordoned(n *corev1.Node)   { n.Spec.Unschedulable = true }
func label(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }

func mkPod(name, node, cpu, mem string, forwarded bool, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
		}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if forwarded {
		p.Labels[wellknown.ClusterLabel] = "beijing"
		p.Labels[wellknown.InstallationLabel] = "host-1"
	}
	return p
}

func TestAllocatable(t *testing.T) {
	cases := map[string]struct {
		nodes    []*corev1.Node
		pods     []*corev1.Pod
		selector labels.Selector
		want     map[corev1.ResourceName]string
	}{
		"sum of ready schedulable nodes": {
			nodes: []*corev1.Node{mkNode("a", "4", "8Gi", "110"), mkNode("b", "2", "4Gi", "110"), mkNode("c", "8", "8Gi", "110", notReady), mkNode("d", "8", "8Gi", "110", cordoned)},
			want:  map[corev1.ResourceName]string{"cpu": "6", "memory": "12Gi", "pods": "220"},
		},
		"unforwarded pods are subtracted, forwarded and finished pods are not": {
			nodes: []*corev1.Node{mkNode("a", "4", "8Gi", "110")},
			pods: []*corev1.Pod{
				mkPod("local", "a", "500m", "1Gi", false, corev1.PodRunning),
				mkPod("forwarded", "a", "1", "1Gi", true, corev1.PodRunning),
				mkPod("done", "a", "1", "1Gi", false, corev1.PodSucceeded),
				mkPod("on-cordoned-node", "x", "1", "1Gi", false, corev1.PodRunning),
				mkPod("unscheduled", "", "1", "1Gi", false, corev1.PodPending),
			},
			want: map[corev1.ResourceName]string{"cpu": "3500m", "memory": "7Gi", "pods": "109"},
		},
		"pods another installation forwarded count against us": {
			nodes: []*corev1.Node{mkNode("a", "4", "8Gi", "110")},
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := mkPod("theirs", "a", "1", "1Gi", true, corev1.PodRunning)
				p.Labels[wellknown.InstallationLabel] = "other-host"
				return p
			}()},
			want: map[corev1.ResourceName]string{"cpu": "3", "memory": "7Gi", "pods": "109"},
		},
		"partition selector": {
			nodes:    []*corev1.Node{mkNode("a", "4", "8Gi", "110", label("location", "beijing")), mkNode("b", "2", "4Gi", "110", label("location", "hangzhou"))},
			selector: labels.SelectorFromSet(labels.Set{"location": "beijing"}),
			want:     map[corev1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "110"},
		},
		"never below zero": {
			nodes: []*corev1.Node{mkNode("a", "1", "1Gi", "1")},
			pods:  []*corev1.Pod{mkPod("p1", "a", "2", "2Gi", false, corev1.PodRunning), mkPod("p2", "a", "0", "0", false, corev1.PodRunning)},
			want:  map[corev1.ResourceName]string{"cpu": "0", "memory": "0", "pods": "0"},
		},
		"no eligible nodes": {
			nodes: []*corev1.Node{mkNode("a", "1", "1Gi", "1", notReady)},
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
		Nodes:     []*corev1.Node{mkNode("a", "4", "8Gi", "110", label("topology.kubernetes.io/zone", "z1")), mkNode("b", "4", "8Gi", "110", label("topology.kubernetes.io/zone", "z2"))},
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
			mkNode("bj-1", "32", "64Gi", "110", label("location", "beijing")),
			mkNode("bj-2", "32", "64Gi", "110", label("location", "beijing")),
			mkNode("hz-1", "64", "64Gi", "110", label("location", "hangzhou")),
		},
		Pods: []*corev1.Pod{
			mkPod("mine", "bj-1", "20", "1Gi", true, corev1.PodRunning),
			mkPod("theirs", "bj-2", "20", "1Gi", false, corev1.PodRunning),
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
	if v := c.Check(fit.DemandOf(mkPod("big", "", "20", "1Gi", false, ""))); v.Fits {
		t.Errorf("a 20-cpu pod fits a slice whose nodes have 12 free each: %+v", v)
	}
	if got := n.Status.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("44")) != 0 {
		t.Errorf("allocatable cpu = %s, want 44 (the sum, less the pod flotilla did not forward)", got.String())
	}
	// Another forwarded pod bound leaves the sum alone but not the
	// nodes: the node must be published again.
	snap.Pods = append(snap.Pods, mkPod("mine-2", "bj-2", "4", "1Gi", true, corev1.PodRunning))
	again := Build(cfg, snap, n, time.Now())
	if !equality.Semantic.DeepEqual(again.Status.Allocatable, n.Status.Allocatable) {
		t.Fatal("a forwarded pod changed the sum")
	}
	if sameNode(n, again) {
		t.Error("a forwarded pod bound on a member node leaves the published node as it was")
	}
}

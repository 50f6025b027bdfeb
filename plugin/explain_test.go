package plugin

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func event(reason, typ, from, message string, at time.Time) corev1.Event {
	return corev1.Event{Reason: reason, Type: typ, Source: corev1.EventSource{Component: from}, Message: message,
		LastTimestamp: metav1.NewTime(at), InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1"}}
}

// TestVerdict: the line at the top names what a user has to know first.
func TestVerdict(t *testing.T) {
	t0 := now.Add(-time.Minute)
	ready := &Cluster{Name: "beijing", Member: "beijing", Mode: "push", Ready: corev1.ConditionTrue}
	running := corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: t0},
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}}}}
	for _, tc := range []struct {
		name     string
		pod      corev1.Pod
		node     *Cluster
		events   []corev1.Event
		want     string
		memberNS string
	}{{
		name: "running",
		pod:  corev1.Pod{Spec: corev1.PodSpec{NodeName: "beijing"}, Status: running},
		node: ready,
		events: []corev1.Event{
			event("Scheduled", "Normal", "default-scheduler", "Successfully assigned shop/web-1 to beijing", t0),
			event("Scheduled", "Normal", "default-scheduler", "Successfully assigned shop/web-1 to beijing-node-2", t0.Add(time.Second)),
		},
		want:     "Running in cluster beijing on member node beijing-node-2, Ready",
		memberNS: "shop",
	}, {
		name: "no cluster fits",
		pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."}}}},
		want: "Pending in the host, not scheduled: 0/3 nodes are available: 3 Insufficient cpu.",
	}, {
		name:   "held by the fit gate",
		pod:    corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "flotilla.io/fit"}}}},
		events: []corev1.Event{event("NoClusterFits", "Warning", "flotilla-policy", "beijing: no node with 40 cpu free (largest 32)", t0)},
		want:   "Pending in the host, no cluster fits: beijing: no node with 40 cpu free (largest 32)",
	}, {
		name: "pending in the member",
		pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "beijing"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."}}}},
		node: ready,
		want: "Pending in cluster beijing, its scheduler cannot place it: 0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
	}, {
		name: "held back by a missing Secret",
		pod:  corev1.Pod{Spec: corev1.PodSpec{NodeName: "beijing"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		node: ready,
		events: []corev1.Event{
			event("FailedMount", "Warning", "flotilla-node", `MountVolume.SetUp failed for volume "db" : secret "db" not found`, t0),
			event("MandatorySecretNotFound", "Warning", "flotilla-node", `Mandatory secret "db" not found; the pod is not forwarded to cluster beijing until it exists`, t0),
		},
		want: `Held back by flotilla, not forwarded to cluster beijing: Mandatory secret "db" not found; the pod is not forwarded to cluster beijing until it exists`,
	}, {
		name: "refused for a field its cluster's Kubernetes drops",
		pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "beijing"}, Status: corev1.PodStatus{Phase: corev1.PodPending, Reason: "FieldNotSupported",
			Message: "spec.hostnameOverride is dropped by Kubernetes v1.34.4 in cluster beijing (its feature gate is off there). Not run there"}},
		node: ready,
		want: "Not run in cluster beijing, which would lose a field it sets: spec.hostnameOverride is dropped by Kubernetes v1.34.4 in cluster beijing (its feature gate is off there). Not run there",
	}, {
		name: "cluster dark",
		pod:  corev1.Pod{Spec: corev1.PodSpec{NodeName: "beijing"}, Status: running},
		node: &Cluster{Name: "beijing", Ready: corev1.ConditionFalse, ReadyMessage: "member cluster apiserver is unreachable: connection refused"},
		want: "Running in cluster beijing, which is not Ready: member cluster apiserver is unreachable: connection refused",
	}, {
		name: "handed back",
		pod:  corev1.Pod{Spec: corev1.PodSpec{NodeName: "beijing"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "MemberUnschedulable", Message: "unschedulable for 30s"}},
		node: ready,
		want: "Handed back by cluster beijing, which could not schedule it: unschedulable for 30s",
	}, {
		name: "preempting",
		pod:  corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: "beijing"}},
		want: "Pending in the host, preempting lower-priority pods in beijing: the host scheduler binds it there once they are gone",
	}, {
		name: "partition",
		pod:  corev1.Pod{Spec: corev1.PodSpec{NodeName: "ke-beijing-cluster"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		node: &Cluster{Name: "ke-beijing-cluster", Member: "kubeedge", Ready: corev1.ConditionTrue},
		want: "Waiting to be forwarded to cluster ke-beijing-cluster (member kubeedge)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.pod.Namespace, tc.pod.Name = "shop", "web-1"
			x := explain(&tc.pod, tc.node, "", tc.events, nil)
			if x.Verdict != tc.want {
				t.Errorf("verdict\n got %q\nwant %q", x.Verdict, tc.want)
			}
			if x.MemberNamespace != tc.memberNS {
				t.Errorf("member namespace %q, want %q", x.MemberNamespace, tc.memberNS)
			}
			var out bytes.Buffer
			if err := printExplanations(&out, []*Explanation{x}, "", now); err != nil {
				t.Fatal(err)
			}
			if first, _, _ := strings.Cut(out.String(), "\n"); first != "shop/web-1: "+tc.want {
				t.Errorf("first line %q", first)
			}
		})
	}
}

// TestExplainNamesPreemptedPods: explain lists the pods the host scheduler
// preempted for the pod, in any namespace, and not those preempted for
// another.
func TestExplainNamesPreemptedPods(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "urgent", UID: "u-1"},
		Spec: corev1.PodSpec{NodeName: "beijing"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	preempted := func(ns, name, by string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + ".preempted"}, Reason: "Preempted",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name, UID: types.UID("v-" + name)},
			Related:        &corev1.ObjectReference{Kind: "Pod", UID: types.UID(by)},
			Message:        "Preempted by pod " + by + " on node beijing"}
	}
	c := fake.NewClientset(pod, preempted("shop", "batch-1", "u-1"), preempted("jobs", "batch-2", "u-1"), preempted("jobs", "batch-3", "u-2"))
	x, err := Explain(t.Context(), c, "shop", "urgent")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"jobs/batch-2 in beijing", "shop/batch-1 in beijing"}; !slices.Equal(x.Preempted, want) {
		t.Errorf("preempted %v, want %v", x.Preempted, want)
	}
	var out bytes.Buffer
	if err := printExplanations(&out, []*Explanation{x}, "", now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Preempted:        jobs/batch-2 in beijing, shop/batch-1 in beijing (lower priority, to make room for this pod)") {
		t.Errorf("the text does not name the preempted pods:\n%s", out.String())
	}
}

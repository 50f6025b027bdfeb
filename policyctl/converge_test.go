package policyctl

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/propagation"
)

// runningPod is a pod of a placed template on cluster, Ready or not, with
// a deletion cost, created at second age.
func runningPod(name, cluster string, ready bool, cost, age int) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return builder.Pod(name).Created(time.Unix(int64(age), 0)).
		Annotation(wellknown.PolicyClusterAnnotation, cluster).Annotation(wellknown.DeletionCostAnnotation, strconv.Itoa(cost)).
		Node(cluster).Condition(corev1.PodReady, status).Obj()
}

func TestNextMove(t *testing.T) {
	divided := func(targets ...propagation.Target) propagation.Decision {
		return propagation.Decision{Mode: policyv1alpha1.ReplicaSchedulingTypeDivided, Targets: targets}
	}
	twoOne := divided(propagation.Target{Cluster: "a", Replicas: 2}, propagation.Target{Cluster: "b", Replicas: 1})
	for name, tc := range map[string]struct {
		d        propagation.Decision
		replicas int32
		pods     []*corev1.Pod
		want     string // pod name, "" for none
	}{
		"at the targets": {twoOne, 3, []*corev1.Pod{
			runningPod("a1", "a", true, -1, 1), runningPod("a2", "a", true, -2, 2), runningPod("b1", "b", true, -1, 3)}, ""},
		"one too many in b: b's cheapest pod moves": {twoOne, 3, []*corev1.Pod{
			runningPod("a1", "a", true, -1, 1), runningPod("b1", "b", true, -1, 2), runningPod("b2", "b", true, -3, 3)}, "b2"},
		"not steady (a pod not Ready): nothing moves yet": {twoOne, 3, []*corev1.Pod{
			runningPod("a1", "a", true, -1, 1), runningPod("b1", "b", true, -1, 2), runningPod("b2", "b", false, -3, 3)}, ""},
		"scaling (more pods than replicas): nothing moves": {twoOne, 3, []*corev1.Pod{
			runningPod("a1", "a", true, -1, 1), runningPod("a2", "a", true, -1, 1), runningPod("b1", "b", true, -1, 2), runningPod("b2", "b", true, -3, 3)}, ""},
		"a cluster no longer chosen empties even while not steady": {twoOne, 3, []*corev1.Pod{
			runningPod("a1", "a", false, -1, 1), runningPod("c1", "c", false, -1, 2)}, "c1"},
		"scaling down to a cluster's share of zero: its controller deletes, nothing is evicted": {
			divided(propagation.Target{Cluster: "a", Replicas: 1}, propagation.Target{Cluster: "b", Replicas: 0}), 1, []*corev1.Pod{
				runningPod("a1", "a", true, -1, 1), runningPod("b1", "b", true, -2, 2), runningPod("a2", "a", true, -3, 3)}, ""},
		"a share of zero left over once steady moves": {
			divided(propagation.Target{Cluster: "a", Replicas: 1}, propagation.Target{Cluster: "b", Replicas: 0}), 1, []*corev1.Pod{
				runningPod("b1", "b", true, -2, 2)}, "b1"},
		"Duplicated: only misplaced pods move": {propagation.Decision{Mode: policyv1alpha1.ReplicaSchedulingTypeDuplicated,
			Targets: []propagation.Target{{Cluster: "a", Replicas: 2}}}, 0, []*corev1.Pod{
			runningPod("a1", "a", true, 0, 1), runningPod("b1", "b", true, 0, 2)}, "b1"},
	} {
		t.Run(name, func(t *testing.T) {
			m := nextMove(tc.d, tc.replicas, tc.pods)
			got := ""
			if m != nil {
				got = m.pod.Name
			}
			if got != tc.want {
				t.Errorf("moves %q, want %q", got, tc.want)
			}
		})
	}
}

// TestConvergeWaitsForRollout: a Divided template whose pods sit steady
// but one over in cluster b is rebalanced — unless its controller is in
// the middle of replacing them, where that same picture (every pod Ready,
// the first new one placed where a replica is already over) is a moment of
// the rollout, and an eviction would make one more pod unavailable than
// the user's maxUnavailable allows.
func TestConvergeWaitsForRollout(t *testing.T) {
	pods := func() []*corev1.Pod {
		out := []*corev1.Pod{runningPod("a1", "a", true, -1, 1), runningPod("b1", "b", true, -1, 2), runningPod("b2", "b", true, -3, 3)}
		for _, p := range out {
			p.Namespace = "shop"
		}
		return out
	}
	pl := &placement{policy: "PropagationPolicy shop/web", decision: propagation.Decision{Mode: policyv1alpha1.ReplicaSchedulingTypeDivided,
		Targets: []propagation.Target{{Cluster: "a", Replicas: 2}, {Cluster: "b", Replicas: 1}}}}
	deployment := func(status appsv1.DeploymentStatus) client.Object {
		return builder.Deployment("web").Namespace("shop").UID("dep").Generation(2).Replicas(3).Status(status).Obj()
	}
	statefulSet := func(status appsv1.StatefulSetStatus) client.Object {
		return builder.StatefulSet("web").Namespace("shop").UID("dep").Generation(2).Replicas(3).Status(status).Obj()
	}
	stalled := []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
	for name, tc := range map[string]struct {
		template client.Object
		evicts   string // pod name, "" for none
	}{
		"Deployment done rolling: b's cheapest pod moves":                   {deployment(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3}), "b2"},
		"Deployment one new pod in, old ones to go: nothing moves":          {deployment(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1}), ""},
		"Deployment changed, not yet seen by its controller: nothing moves": {deployment(appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3}), ""},
		"Deployment whose rollout stalled: b's cheapest pod moves":          {deployment(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, Conditions: stalled}), "b2"},
		"StatefulSet done rolling: b's cheapest pod moves":                  {statefulSet(appsv1.StatefulSetStatus{ObservedGeneration: 2, CurrentRevision: "web-2", UpdateRevision: "web-2"}), "b2"},
		"StatefulSet between revisions: nothing moves":                      {statefulSet(appsv1.StatefulSetStatus{ObservedGeneration: 2, CurrentRevision: "web-1", UpdateRevision: "web-2"}), ""},
	} {
		t.Run(name, func(t *testing.T) {
			var evicted []string
			objs := []client.Object{tc.template}
			for _, p := range pods() {
				objs = append(objs, p)
			}
			r, _ := reconcilerFor(t, interceptor.Funcs{SubResourceCreate: func(_ context.Context, _ client.Client, sub string, obj client.Object, _ client.Object, _ ...client.SubResourceCreateOption) error {
				if sub == "eviction" {
					evicted = append(evicted, obj.GetName())
				}
				return nil
			}}, objs...)
			kind := "Deployment"
			if _, ok := tc.template.(*appsv1.StatefulSet); ok {
				kind = "StatefulSet"
			}
			tpl := Template{APIVersion: "apps/v1", Kind: kind, Namespace: "shop", Name: "web", UID: "dep"}
			if _, err := r.converge(t.Context(), tpl, pl, pods()); err != nil {
				t.Fatal(err)
			}
			var want []string
			if tc.evicts != "" {
				want = []string{tc.evicts}
			}
			if !slices.Equal(evicted, want) {
				t.Errorf("evicted %v, want %v", evicted, want)
			}
		})
	}
}

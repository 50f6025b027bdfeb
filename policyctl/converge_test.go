package policyctl

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/propagation"
)

// runningPod is a pod of a placed template on cluster, Ready or not, with
// a deletion cost, created at second age.
func runningPod(name, cluster string, ready bool, cost, age int) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(age), 0)),
			Annotations: map[string]string{ClusterAnnotation: cluster, DeletionCostAnnotation: strconv.Itoa(cost)}},
		Spec:   corev1.PodSpec{NodeName: cluster},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
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

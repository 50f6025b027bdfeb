package podstate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodState(t *testing.T) {
	now := metav1.Now()
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	cases := map[string]struct {
		pod                     corev1.Pod
		terminal, leaving, isUp bool
	}{
		"pending":   {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}},
		"running":   {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready}}, isUp: true},
		"succeeded": {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, terminal: true, leaving: true},
		"failed":    {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, terminal: true, leaving: true},
		"deleting": {pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready}}, leaving: true, isUp: true},
		"not ready": {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}},
	}
	for name, c := range cases {
		if got := Terminal(&c.pod); got != c.terminal {
			t.Errorf("%s: Terminal = %t", name, got)
		}
		if got := Leaving(&c.pod); got != c.leaving {
			t.Errorf("%s: Leaving = %t", name, got)
		}
		if got := Ready(&c.pod); got != c.isUp {
			t.Errorf("%s: Ready = %t", name, got)
		}
	}
	up := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	down := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
	if !NodeReady(up) || NodeReady(down) || NodeReady(&corev1.Node{}) {
		t.Error("NodeReady misreads the Ready condition")
	}
}

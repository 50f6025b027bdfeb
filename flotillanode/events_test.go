package flotillanode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

func TestQuietSuccess(t *testing.T) {
	fake := record.NewFakeRecorder(10)
	r := quietSuccess{fake}
	pod := &corev1.Pod{}
	r.Event(pod, corev1.EventTypeNormal, "ProviderCreateSuccess", "Create pod in provider successfully")
	r.Eventf(pod, corev1.EventTypeNormal, "ProviderDeleteSuccess", "Delete pod in provider successfully")
	r.Event(pod, corev1.EventTypeWarning, "ProviderCreateFailed", "rejected")
	r.Eventf(pod, corev1.EventTypeNormal, "OptionalConfigMapNotFound", "configmap %q", "x")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	want := []string{"Warning ProviderCreateFailed rejected", `Normal OptionalConfigMapNotFound configmap "x"`}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("events = %q, want %q", got, want)
	}
}

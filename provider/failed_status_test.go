// This file tests the status of a host pod whose member pod went away.

package provider

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/wellknown"
)

func TestDeletedStatus(t *testing.T) {
	host := hostPod()
	started := metav1.NewTime(time.Unix(500, 0))
	host.Status = corev1.PodStatus{
		Phase:             corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
	}
	now := metav1.NewTime(time.Unix(900, 0))
	s := DeletedStatus(host, "beijing", now)
	if s.Phase != corev1.PodFailed || s.Reason != wellknown.ReasonMemberPodDeleted {
		t.Fatalf("phase/reason = %s/%s", s.Phase, s.Reason)
	}
	if s.Conditions[0].Status != corev1.ConditionFalse {
		t.Errorf("Ready = %s, want False", s.Conditions[0].Status)
	}
	term := s.ContainerStatuses[0].State.Terminated
	if term == nil || term.StartedAt != started || term.FinishedAt != now || s.ContainerStatuses[0].Ready {
		t.Errorf("container status = %+v", s.ContainerStatuses[0])
	}
}

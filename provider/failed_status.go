// This file holds the statuses a host pod is given when flotilla cannot
// run it: forwarding failed for good, or its member pod went away.

package provider

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/wellknown"
)

// ForwardFailedStatus is the host pod's status when it cannot be forwarded
// to cluster: Failed, as a kubelet leaves a pod it rejects at admission, so
// that its controller replaces it and kubectl shows why.
func ForwardFailedStatus(host *corev1.Pod, cluster string, err error) corev1.PodStatus {
	s := *host.Status.DeepCopy()
	s.Phase = corev1.PodFailed
	s.Reason = wellknown.ReasonForwardFailed
	s.Message = fmt.Sprintf("Forwarding to member cluster %s failed: %v", cluster, err)
	return s
}

// DeletedStatus is the host pod's status after its member pod disappeared
// out of band: Failed, like a pod a kubelet evicted, so that its controller
// replaces it while the pod stays visible with the reason.
func DeletedStatus(host *corev1.Pod, cluster string, now metav1.Time) corev1.PodStatus {
	s := *host.Status.DeepCopy()
	s.Phase = corev1.PodFailed
	s.Reason = wellknown.ReasonMemberPodDeleted
	s.Message = fmt.Sprintf("The pod was deleted from member cluster %s outside of flotilla.", cluster)
	for i := range s.Conditions {
		switch s.Conditions[i].Type {
		case corev1.PodReady, corev1.ContainersReady:
			if s.Conditions[i].Status != corev1.ConditionFalse {
				s.Conditions[i].Status = corev1.ConditionFalse
				s.Conditions[i].Reason = wellknown.ReasonPodFailed
				s.Conditions[i].LastTransitionTime = now
			}
		}
	}
	terminate := func(cs []corev1.ContainerStatus) {
		for i := range cs {
			if cs[i].State.Terminated != nil {
				continue
			}
			started := now
			if cs[i].State.Running != nil {
				started = cs[i].State.Running.StartedAt
			}
			cs[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: wellknown.ReasonMemberPodDeleted, StartedAt: started, FinishedAt: now,
			}}
			cs[i].Ready = false
			f := false
			cs[i].Started = &f
		}
	}
	terminate(s.InitContainerStatuses)
	terminate(s.ContainerStatuses)
	return s
}

// This file gives a held pod the events and container statuses a kubelet
// gives a pod waiting for what it uses.

package provider

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// notFound is how a kubelet words a missing object.
func notFound(ref objectRef) string {
	switch ref.kind {
	case kindSecret:
		return fmt.Sprintf("secret %q not found", ref.name)
	case kindConfigMap:
		return fmt.Sprintf("configmap %q not found", ref.name)
	}
	return fmt.Sprintf("serviceaccounts %q not found", ref.name)
}

// missingEvent is the event a kubelet records when a mandatory object is
// missing: FailedMount naming the volume when a volume needs it, otherwise
// Failed as for a container whose configuration cannot be built.
func missingEvent(d dependency) (reason, message string) {
	for _, u := range d.uses {
		if u.volume == "" || u.optional {
			continue
		}
		cause := notFound(d.objectRef)
		if d.kind == kindServiceAccount {
			cause = "failed to fetch token: " + cause
		}
		return wellknown.EventFailedMount, fmt.Sprintf("MountVolume.SetUp failed for volume %q : %s", u.volume, cause)
	}
	return wellknown.EventFailed, "Error: " + notFound(d.objectRef)
}

// heldBackReason is the second event of a missing mandatory Secret or
// ConfigMap (see wellknown.EventMandatorySecretNotFound).
var heldBackReason = map[string]string{
	kindSecret:    wellknown.EventMandatorySecretNotFound,
	kindConfigMap: wellknown.EventMandatoryConfigMapNotFound,
}

// waitingStatus is the status of a host pod that waits for missing mandatory
// objects, as a kubelet shows it: Pending, containers waiting in
// ContainerCreating while a volume cannot be set up, or in
// CreateContainerConfigError when only their environment is incomplete.
func waitingStatus(host *corev1.Pod, missing []dependency) corev1.PodStatus {
	s := *host.Status.DeepCopy()
	s.Phase = corev1.PodPending
	volumes := false
	envs := map[string]string{}
	for _, d := range missing {
		for _, u := range d.uses {
			switch {
			case u.optional || u.pull:
			case u.container != "":
				if _, ok := envs[u.container]; !ok {
					envs[u.container] = notFound(d.objectRef)
				}
			default:
				volumes = true // a volume, or the ServiceAccount admission needs
			}
		}
	}
	waiting := func(c corev1.Container, reason string) corev1.ContainerStatus {
		w := &corev1.ContainerStateWaiting{Reason: reason}
		if msg, ok := envs[c.Name]; ok && !volumes && reason == wellknown.ReasonContainerCreating {
			w = &corev1.ContainerStateWaiting{Reason: wellknown.ReasonCreateContainerConfigError, Message: msg}
		}
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptr.To(false), State: corev1.ContainerState{Waiting: w}}
	}
	s.InitContainerStatuses, s.ContainerStatuses = nil, nil
	for _, c := range host.Spec.InitContainers {
		s.InitContainerStatuses = append(s.InitContainerStatuses, waiting(c, wellknown.ReasonContainerCreating))
	}
	// Regular containers wait for the init containers first.
	reason := wellknown.ReasonContainerCreating
	if len(host.Spec.InitContainers) > 0 {
		reason = wellknown.ReasonPodInitializing
	}
	for _, c := range host.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, waiting(c, reason))
	}
	return s
}

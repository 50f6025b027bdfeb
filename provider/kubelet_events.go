// This file holds the events and status reasons a kubelet gives a pod
// waiting for what it uses, which flotilla gives a held pod.

package provider

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Event reasons about what a pod depends on. FailedMount, Failed and
// FailedToRetrieveImagePullSecret are the kubelet's own reasons, so that a
// user sees on the host pod what a kubelet would have reported.
const (
	// EventFailedMount: a volume's Secret, ConfigMap or ServiceAccount is missing.
	EventFailedMount = "FailedMount"
	// EventFailed: a container's environment names a missing Secret or ConfigMap.
	EventFailed = "Failed"
	// EventFailedToRetrieveImagePullSecret: an image pull Secret is missing;
	// as with a kubelet, the pod runs anyway.
	EventFailedToRetrieveImagePullSecret = "FailedToRetrieveImagePullSecret"
	// EventOptionalSecretNotFound and EventOptionalConfigMapNotFound: an
	// optional Secret or ConfigMap is missing; the pod is forwarded without
	// it. EventMandatorySecretNotFound and EventMandatoryConfigMapNotFound
	// come with FailedMount or Failed and say that the pod is held back
	// until the object exists. These four are virtual-kubelet's reasons for
	// the same cases, so tooling written for virtual-kubelet providers (its
	// conformance suite among them) recognises them.
	EventOptionalSecretNotFound     = "OptionalSecretNotFound"
	EventOptionalConfigMapNotFound  = "OptionalConfigMapNotFound"
	EventMandatorySecretNotFound    = "MandatorySecretNotFound"
	EventMandatoryConfigMapNotFound = "MandatoryConfigMapNotFound"
	// EventDependencyConflict: the member namespace already has an object of
	// that name which flotilla does not manage; it is used as it is.
	EventDependencyConflict = "DependencyConflict"
)

// Container waiting reasons of a pod that waits for a missing dependency,
// as a kubelet reports them.
const (
	ReasonContainerCreating          = "ContainerCreating"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonPodInitializing            = "PodInitializing"
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
		return EventFailedMount, fmt.Sprintf("MountVolume.SetUp failed for volume %q : %s", u.volume, cause)
	}
	return EventFailed, "Error: " + notFound(d.objectRef)
}

// heldBackReason is the second event of a missing mandatory Secret or
// ConfigMap (see EventMandatorySecretNotFound).
var heldBackReason = map[string]string{
	kindSecret:    EventMandatorySecretNotFound,
	kindConfigMap: EventMandatoryConfigMapNotFound,
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
		if msg, ok := envs[c.Name]; ok && !volumes && reason == ReasonContainerCreating {
			w = &corev1.ContainerStateWaiting{Reason: ReasonCreateContainerConfigError, Message: msg}
		}
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptr.To(false), State: corev1.ContainerState{Waiting: w}}
	}
	s.InitContainerStatuses, s.ContainerStatuses = nil, nil
	for _, c := range host.Spec.InitContainers {
		s.InitContainerStatuses = append(s.InitContainerStatuses, waiting(c, ReasonContainerCreating))
	}
	// Regular containers wait for the init containers first.
	reason := ReasonContainerCreating
	if len(host.Spec.InitContainers) > 0 {
		reason = ReasonPodInitializing
	}
	for _, c := range host.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, waiting(c, reason))
	}
	return s
}

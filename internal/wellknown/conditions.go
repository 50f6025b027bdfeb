// Condition types flotilla sets, and the reasons of the conditions and pod
// statuses it writes.

package wellknown

import corev1 "k8s.io/api/core/v1"

// NodeKubeletAPIUnreachable is the virtual node's condition saying whether
// the host apiserver reaches its kubelet endpoint, which carries kubectl
// logs, exec, attach, port-forward and the node's stats. Like a kubelet's
// pressure conditions it is True when something is wrong. Pods keep being
// forwarded either way, so it does not touch Ready.
const NodeKubeletAPIUnreachable corev1.NodeConditionType = "KubeletAPIUnreachable"

// Reasons of the virtual node's conditions.
const (
	// ReasonMemberReachable: Ready, the member's apiserver answers.
	ReasonMemberReachable = "MemberReachable"
	// ReasonMemberUnreachable: the member's apiserver cannot be reached.
	ReasonMemberUnreachable = "MemberUnreachable"
	// ReasonMemberHasSufficientMemory explains MemoryPressure False.
	ReasonMemberHasSufficientMemory = "MemberHasSufficientMemory"
	// ReasonMemberHasNoDiskPressure explains DiskPressure False.
	ReasonMemberHasNoDiskPressure = "MemberHasNoDiskPressure"
	// ReasonMemberHasSufficientPID explains PIDPressure False.
	ReasonMemberHasSufficientPID = "MemberHasSufficientPID"
	// ReasonMemberNetworkReady explains NetworkUnavailable False.
	ReasonMemberNetworkReady = "MemberNetworkReady"
	// ReasonKubeletAPIReachable explains NodeKubeletAPIUnreachable False.
	ReasonKubeletAPIReachable = "KubeletAPIReachable"
	// ReasonKubeletAPIProbeFailed explains NodeKubeletAPIUnreachable True.
	ReasonKubeletAPIProbeFailed = "KubeletAPIProbeFailed"
	// ReasonKubeletAPINotProbedYet explains NodeKubeletAPIUnreachable
	// Unknown.
	ReasonKubeletAPINotProbedYet = "KubeletAPINotProbedYet"
)

// Reasons of a policy's Ready condition (policyv1alpha1.ConditionReady);
// when a template cannot be placed the reason is EventPlacementFailed.
const (
	// ReasonPlaced: every template the policy selects is placed.
	ReasonPlaced = "Placed"
	// ReasonInvalidPolicy: a stored policy fails validation (it was stored
	// before the webhook checked it); the condition's message says why.
	ReasonInvalidPolicy = "InvalidPolicy"
)

// Reasons of a failed host pod's status (flotilla-node).
const (
	// ReasonMemberUnschedulable is the status reason of a host pod that
	// flotilla-node handed back because its member could not schedule it
	// (as a kubelet fails a pod it cannot admit with OutOfcpu), so that the
	// pod's controller creates a replacement elsewhere.
	ReasonMemberUnschedulable = "MemberUnschedulable"
	// ReasonMemberPodDeleted is the status reason of a host pod without a
	// controller after its member pod was deleted or evicted in the member
	// by someone other than flotilla (a pod with one is deleted instead).
	ReasonMemberPodDeleted = "MemberPodDeleted"
	// ReasonForwardFailed is the host pod's status reason when forwarding
	// it failed for a reason that retrying cannot fix.
	ReasonForwardFailed = "ForwardFailed"
)

// Reasons of a host pod's containers and conditions (flotilla-node), the
// kubelet's own, so that a held or failed pod reads as a kubelet would show
// it.
const (
	// ReasonContainerCreating: the container waits because a volume's
	// Secret, ConfigMap or ServiceAccount is missing.
	ReasonContainerCreating = "ContainerCreating"
	// ReasonCreateContainerConfigError: the container waits because its
	// environment names a missing Secret or ConfigMap.
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	// ReasonPodInitializing: a regular container waits for the init
	// containers.
	ReasonPodInitializing = "PodInitializing"
	// ReasonPodFailed explains Ready and ContainersReady False on a pod
	// that failed.
	ReasonPodFailed = "PodFailed"
)

// Kubernetes' reasons of a pod's DisruptionTarget condition that flotilla
// reads on member pods.
const (
	// ReasonEvictionByEvictionAPI: the pod was evicted through the
	// eviction API (kubectl drain, a descheduler).
	ReasonEvictionByEvictionAPI = "EvictionByEvictionAPI"
)

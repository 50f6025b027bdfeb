// Reasons of the Events flotilla records, each on the object a user looks
// at.

package wellknown

// On host pods, by placement (flotilla-policy).
const (
	// EventNoClusterFits: the pod waits in the host because no cluster
	// can run it; the message names each cluster's answer.
	EventNoClusterFits = "NoClusterFits"
	// EventClusterFits: a cluster can now run a pod that waited.
	EventClusterFits = "ClusterFits"
	// EventPlacedElsewhere: a pod went to another cluster than the one
	// that handed back its predecessor.
	EventPlacedElsewhere = "PlacedElsewhere"
	// EventWaitingForNode: a pod no node fits was sent to a cluster
	// that can add one.
	EventWaitingForNode = "WaitingForNode"
	// EventLeftOut: a pod was bound after placement left out clusters
	// that could not run it; the message names them and why.
	EventLeftOut = "ClustersLeftOut"
	// EventRebalanced: a pod was evicted to move a replica toward the
	// decision; its controller recreates it where a replica is missing.
	EventRebalanced = "Rebalanced"
)

// On templates, by the policy controller (flotilla-policy).
const (
	// EventPlacementFailed: the template's policy cannot place it now.
	EventPlacementFailed = "PlacementFailed"
	// EventUnplacedPodRecreated: a pod admitted while the webhook was
	// unavailable was deleted so that its controller recreates it placed.
	EventUnplacedPodRecreated = "UnplacedPodRecreated"
	// EventDerivedConflict: a derived workload's name is taken by an object
	// the controller did not make; that cluster runs no replicas of the
	// template.
	EventDerivedConflict = "DerivedWorkloadConflict"
)

// On host pods, by flotilla-node.
const (
	// EventWaitingForCluster: a host pod being deleted stays Terminating
	// because its member cannot be reached to stop the member pod.
	EventWaitingForCluster = "WaitingForCluster"
	// EventMandatorySecretNotFound and EventMandatoryConfigMapNotFound
	// come with EventFailedMount or EventFailed and say that the pod is
	// held back until the missing Secret or ConfigMap exists; they are
	// virtual-kubelet's reasons for the same case.
	EventMandatorySecretNotFound = "MandatorySecretNotFound"
	// EventMandatoryConfigMapNotFound: see EventMandatorySecretNotFound.
	EventMandatoryConfigMapNotFound = "MandatoryConfigMapNotFound"
	// EventFailedMount (the kubelet's own reason): a volume's Secret,
	// ConfigMap or ServiceAccount is missing.
	EventFailedMount = "FailedMount"
	// EventFailed (the kubelet's own reason): a container's environment
	// names a missing Secret or ConfigMap.
	EventFailed = "Failed"
	// EventFailedToRetrieveImagePullSecret (the kubelet's own reason): an
	// image pull Secret is missing; as with a kubelet, the pod runs anyway.
	EventFailedToRetrieveImagePullSecret = "FailedToRetrieveImagePullSecret"
	// EventOptionalSecretNotFound and EventOptionalConfigMapNotFound: an
	// optional Secret or ConfigMap is missing; the pod is forwarded without
	// it. They are virtual-kubelet's reasons for the same cases, so tooling
	// written for virtual-kubelet providers (its conformance suite among
	// them) recognises them.
	EventOptionalSecretNotFound = "OptionalSecretNotFound"
	// EventOptionalConfigMapNotFound: see EventOptionalSecretNotFound.
	EventOptionalConfigMapNotFound = "OptionalConfigMapNotFound"
	// EventDependencyConflict: the member namespace already has an object of
	// that name which flotilla does not manage; it is used as it is.
	EventDependencyConflict = "DependencyConflict"
	// EventForwardRetrying: forwarding the pod failed for a reason that may
	// pass; it is retried.
	EventForwardRetrying = "ForwardRetrying"
	// EventForwardFailed: forwarding the pod failed for a reason retrying
	// cannot fix; the pod fails with ReasonForwardFailed.
	EventForwardFailed = "ForwardFailed"
	// EventOverrideFailed: the override policies for the cluster cannot be
	// applied to the pod (an overrider that does not fit it); it is not
	// forwarded until they are fixed.
	EventOverrideFailed = "OverrideFailed"
	// EventMemberPodDeleted: the member pod was deleted in the member
	// outside of flotilla. A pod with a controller is deleted for it to
	// replace; a bare pod fails with ReasonMemberPodDeleted.
	EventMemberPodDeleted = "MemberPodDeleted"
	// EventAdopted: a running member pod became this host pod's (see
	// AdoptAnnotation).
	EventAdopted = "Adopted"
	// EventReleased: the member pod was handed back to its cluster as the
	// host pod went (ReleaseAnnotation).
	EventReleased = "Released"
	// EventHandedBack: the member could not schedule the pod, so it was
	// failed in the host for its controller to replace, as a kubelet fails
	// a pod it cannot admit (OutOfcpu); its status reason is
	// ReasonMemberUnschedulable.
	EventHandedBack = "HandedBack"
	// EventMemberUnschedulable: the member cannot schedule a pod without a
	// controller, which is therefore left waiting there. It is an event
	// reason; ReasonMemberUnschedulable, of the same value, is the status
	// reason of a pod handed back.
	EventMemberUnschedulable = "MemberUnschedulable"
)

// On host pods, by flotilla-node, when a member drains a node.
const (
	// EventMemberPodEvicted: the member pod was evicted in the member
	// through the eviction API, as a drain there does. A pod with a
	// controller is deleted for it to replace, as an eviction does in one
	// cluster; a bare pod fails with ReasonMemberPodDeleted.
	EventMemberPodEvicted = "MemberPodEvicted"
)

// On host claims, by flotilla-node.
const (
	// EventClaimBound: the claim's member copy is bound in its cluster.
	EventClaimBound = "BoundInCluster"
	// EventClaimConflict: a member claim of that name exists and is not
	// this claim's copy; flotilla leaves it alone and the claim's pods are
	// not forwarded.
	EventClaimConflict = "ClaimConflict"
	// EventResizing: the host claim was resized; the member is asked for
	// the new size.
	EventResizing = "Resizing"
	// EventResizeRefused: the member will not grow its copy of the claim
	// (its class does not allow expansion, ...).
	EventResizeRefused = "ResizeRefused"
	// EventNotOffered: the claim asks for what no cluster's volume can be
	// (a data source flotilla cannot carry to a member, a selector no
	// volume can match); it stays Pending and says why.
	EventNotOffered = "NotOfferedByCluster"
)

// On host Services, by flotilla-node.
const (
	// EventServiceCollision: the member namespace already has a Service of
	// that name which flotilla does not manage; it is left alone.
	EventServiceCollision = "ServiceCollision"
)

// On member namespaces, by flotilla-node.
const (
	// EventNamespaceKept is the reason of the Event on a member namespace
	// flotilla created and keeps, because someone else's objects are in it.
	EventNamespaceKept = "FlotillaNamespaceKept"
)

// Priority and preemption, on host pods, by flotilla-node.
const (
	// EventPriorityClassDiffers: the member has a PriorityClass of the
	// name the pod gives with another value; the member's is kept, and the
	// member's scheduler orders the pod by it.
	EventPriorityClassDiffers = "PriorityClassDiffers"
	// EventPriorityClassCopied: the member had no PriorityClass of the
	// name the pod gives; flotilla-node made one with the host's value.
	EventPriorityClassCopied = "PriorityClassCopied"
)

// On host pods, by flotilla-node and flotilla-policy: debugging
// (kubectl debug).
const (
	// EventEphemeralContainerRefused: the member refused an ephemeral
	// container added to the host pod; the message is the member's.
	EventEphemeralContainerRefused = "EphemeralContainerRefused"
	// EventEphemeralContainerRetrying: adding an ephemeral container to
	// the member pod failed for a reason that may pass, and is retried.
	EventEphemeralContainerRetrying = "EphemeralContainerRetrying"
	// ReasonNodeDebugRefused is the status reason of a node debugging pod
	// (kubectl debug node/<virtual node>) that a virtual node refused: no
	// one node stands behind it.
	ReasonNodeDebugRefused = "NodeDebugRefused"
)

// Preemption by a member's scheduler, on host pods, by flotilla-policy.
const (
	// EventPreemptingInMember: no cluster can run the pod now, nor by the
	// host scheduler's preemption; it was sent to a cluster whose own
	// scheduler can preempt lower-priority pods there for it.
	EventPreemptingInMember = "PreemptingInMember"
)

// On host pods, by flotilla-node, for fields a Kubernetes version cannot
// carry.
const (
	// EventFieldNotSupported: the pod sets a field that the member's
	// Kubernetes does not know or drops (a feature gate off there), or
	// that the host knows and flotilla's types do not; the message names
	// the field, the version and the cluster. The pod is not run there: a
	// pod with a controller is deleted for it to make a replacement that
	// placement sends elsewhere, a bare pod stays Pending with
	// ReasonFieldNotSupported.
	EventFieldNotSupported = "FieldNotSupported"
	// ReasonFieldNotSupported is the status reason of a bare host pod
	// that waits because of EventFieldNotSupported.
	ReasonFieldNotSupported = "FieldNotSupported"
	// EventStatusFieldNotCarried: the member set a status field of the
	// pod that flotilla's types do not know, so it is not shown in the
	// host; the message names the field and the cluster.
	EventStatusFieldNotCarried = "StatusFieldNotCarried"
)

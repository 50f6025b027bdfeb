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
	// EventClaimConflict: a member claim of that name exists and is not
	// flotilla's; the pod is not forwarded.
	EventClaimConflict = "ClaimConflict"
)

// On member namespaces, by flotilla-node.
const (
	// EventNamespaceKept is the reason of the Event on a member namespace
	// flotilla created and keeps, because someone else's objects are in it.
	EventNamespaceKept = "FlotillaNamespaceKept"
)

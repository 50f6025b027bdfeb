// Annotations flotilla writes on virtual nodes, host pods and workloads,
// and member objects.

package wellknown

// On virtual nodes (flotilla-node).
const (
	// ModeAnnotation on a virtual node says how flotilla-node reaches its
	// member and the host: "push" (it runs beside the host) or "pull" (it
	// runs in the member and only dials out).
	ModeAnnotation = Prefix + "mode"
	// NamespaceMappingAnnotation on a virtual node says which member
	// namespace a host namespace's objects go to: SameName, or Suffix
	// (<namespace>-<virtual node>).
	NamespaceMappingAnnotation = Prefix + "namespace-mapping"
	// FitModelAnnotation on a virtual node is the compact model of its
	// member nodes (shapes, labels, taints, free resources) that placement
	// checks a pod against before it is bound (package fit).
	FitModelAnnotation = Prefix + "fit-model"
	// TaintsAnnotation records, on a virtual node, the taints flotilla-node
	// set from its configuration, so that a later start can tell them from
	// the taints others added (the node lifecycle controller's, an
	// operator's).
	TaintsAnnotation = Prefix + "taints"
)

// On member objects (flotilla-node).
const (
	// HostNamespaceAnnotation on a member object is the namespace of its host object.
	HostNamespaceAnnotation = Prefix + "host-namespace"
	// HostNameAnnotation on a member object is the name of its host object.
	HostNameAnnotation = Prefix + "host-name"
	// ReleasedByAnnotation on a kept member namespace names the virtual
	// cluster and installation that created it and let it go.
	ReleasedByAnnotation = Prefix + "released-by"
)

// On host pods, by placement (flotilla-policy).
const (
	// PlacementAnnotation names the policy that placed the pod, as
	// "PropagationPolicy/<namespace>/<name>" or "ClusterPropagationPolicy/<name>".
	PlacementAnnotation = "policy.flotilla.io/placement"
	// TemplateAnnotation is the UID of the pod's template, by which the
	// webhook counts a template's pods.
	TemplateAnnotation = "policy.flotilla.io/template-uid"
	// PolicyClusterAnnotation is the one cluster a pod was placed in:
	// assigned to a Divided template's pod, or where a Duplicated template
	// or its copy runs.
	PolicyClusterAnnotation = "policy.flotilla.io/cluster"
	// AssignmentAnnotation identifies one assignment, so the webhook can
	// tell when the pod cache has caught up with it.
	AssignmentAnnotation = "policy.flotilla.io/assignment"
	// DeletionCostAnnotation is read by the ReplicaSet controller: on scale
	// down it deletes pods of lower cost first.
	DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"
	// MemberConstraintsAnnotation on a host pod holds the node selector and
	// required node affinity the pod was created with, when placement
	// rewrote them for the host scheduler; flotilla-node forwards these to
	// the member instead of the rewritten ones.
	MemberConstraintsAnnotation = Prefix + "member-constraints"
	// FitVerdictAnnotation on a host pod records, when placement left a
	// cluster out, each such cluster's answer: "beijing: no node with 20 cpu
	// free (largest 12)".
	FitVerdictAnnotation = Prefix + "fit-verdict"
	// WaitingForNodeAnnotation on a host pod names the cluster it was sent
	// to so that the cluster's node autoscaler adds a node for it: no node
	// fits it now.
	WaitingForNodeAnnotation = Prefix + "waiting-for-node"
	// DerivedAnnotation marks a workload the controller made from a
	// template for one cluster of a Duplicated placement; its value is the
	// cluster.
	DerivedAnnotation = "policy.flotilla.io/derived-for-cluster"
)

// On host pods, by flotilla-node.
const (
	// AppliedOverridesAnnotation on a host pod lists the override policies
	// applied to it for its cluster, comma-separated: namespace/name for an
	// OverridePolicy, name for a ClusterOverridePolicy.
	AppliedOverridesAnnotation = "policy.flotilla.io/applied-overrides"
)

// On host PersistentVolumes, by flotilla-node.
const (
	// MemberVolumeAnnotation names, on a host PersistentVolume, the member
	// PersistentVolume it stands for.
	MemberVolumeAnnotation = Prefix + "member-volume"
)

// Adoption and release (kubectl flotilla adopt and release, flotilla-node).
const (
	// AdoptAnnotation on a host pod is the UID of the member pod, of the
	// same name in the mapped namespace and not flotilla's, that the host
	// pod takes over instead of forwarding a new one (kubectl flotilla
	// adopt): flotilla-node stamps its identity on that pod, which keeps
	// running.
	AdoptAnnotation = Prefix + "adopt-member-pod"
	// AdoptableAnnotation on a member pod consents to its adoption by the
	// host pod <namespace>/<name> it names. Only someone who may change
	// the member's pods can write it, so a host user who can create pods
	// cannot take over a member's own pod by naming its UID.
	AdoptableAnnotation = Prefix + "adoptable-by"
	// ReleaseAnnotation "true" on a host pod being deleted makes
	// flotilla-node hand its member pod back instead of deleting it: the
	// member pod loses flotilla's identity and keeps running (kubectl
	// flotilla release).
	ReleaseAnnotation = Prefix + "release"
	// AdoptedFromAnnotation on a host workload names where it was adopted
	// from, as <cluster>/<member namespace>/<name>: a second run of adopt
	// resumes its own adoption and refuses anything else's.
	AdoptedFromAnnotation = Prefix + "adopted-from"
	// ReleasedFromAnnotation on a member workload that release made names
	// the host workload it came from, as host/<namespace>/<name>, so that a
	// second run resumes.
	ReleasedFromAnnotation = Prefix + "released-from"
)

// Preemption by a member's scheduler, on host pods, by flotilla-policy.
const (
	// PreemptingInAnnotation on a host pod names the cluster placement
	// sent it to because that cluster's scheduler can make room for it by
	// preempting lower-priority pods there, the member's own among them,
	// which the host scheduler cannot see and so cannot preempt.
	PreemptingInAnnotation = Prefix + "preempting-in"
)

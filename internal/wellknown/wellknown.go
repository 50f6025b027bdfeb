// Package wellknown holds the label, annotation and taint names that flotilla
// components agree on: how a member pod names its host pod, how a virtual node
// names its cluster, and which scheduling terms only make sense in the host.
package wellknown

import "strings"

const (
	// Prefix is the domain under which every flotilla label and annotation lives.
	Prefix = "flotilla.io/"

	// ClusterLabel names the virtual cluster on virtual nodes and on the member
	// objects flotilla creates for that virtual cluster.
	ClusterLabel = Prefix + "cluster"
	// ProviderLabel carries the configured cloud or site provider of a virtual node.
	ProviderLabel = Prefix + "provider"
	// MemberLabel on a virtual node names the member cluster it stands for
	// (flotilla-node's --cluster-name): the same for every label partition
	// of one member.
	MemberLabel = Prefix + "member"
	// ModeAnnotation on a virtual node says how flotilla-node reaches its
	// member and the host: "push" (it runs beside the host) or "pull" (it
	// runs in the member and only dials out).
	ModeAnnotation = Prefix + "mode"
	// NamespaceMappingAnnotation on a virtual node says which member
	// namespace a host namespace's objects go to: SameName, or Suffix
	// (<namespace>-<virtual node>).
	NamespaceMappingAnnotation = Prefix + "namespace-mapping"
	// InstallationLabel on a member object is the identity of the flotilla
	// installation (the host cluster) that created it, so that two hosts
	// sharing a member, or a cluster name, never adopt or delete each
	// other's objects.
	InstallationLabel = Prefix + "installation"
	// HostUIDLabel on a member pod is the UID of the host pod it was forwarded
	// from; it is the adoption key after a restart.
	HostUIDLabel = Prefix + "host-uid"
	// HostNamespaceAnnotation on a member object is the namespace of its host object.
	HostNamespaceAnnotation = Prefix + "host-namespace"
	// HostNameAnnotation on a member object is the name of its host object.
	HostNameAnnotation = Prefix + "host-name"
	// ManagedByLabel marks member objects (namespaces included) that flotilla
	// created and may therefore update or delete.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel on flotilla's member objects.
	ManagedByValue = "flotilla"

	// TypeLabel and TypeValue mark every virtual-kubelet node, as the wider
	// virtual-kubelet ecosystem does.
	TypeLabel = "type"
	// TypeValue is the value of TypeLabel on virtual nodes.
	TypeValue = "virtual-kubelet"
	// RoleLabel and RoleValue are the role label virtual-kubelet nodes carry.
	RoleLabel = "kubernetes.io/role"
	// RoleValue is the value of RoleLabel on virtual nodes.
	RoleValue = "agent"
	// HostnameLabel is the well-known per-node hostname label.
	HostnameLabel = "kubernetes.io/hostname"

	// ProviderTaintKey is the key of the default taint on virtual nodes, so that
	// only pods that tolerate leaving the host cluster are placed on them.
	ProviderTaintKey = "virtual-kubelet.io/provider"
	// ProviderTaintValue is the value of the default virtual node taint.
	ProviderTaintValue = "flotilla"

	// FitModelAnnotation on a virtual node is the compact model of its
	// member nodes (shapes, labels, taints, free resources) that placement
	// checks a pod against before it is bound (package fit).
	FitModelAnnotation = Prefix + "fit-model"
	// MemberConstraintsAnnotation on a host pod holds the node selector and
	// required node affinity the pod was created with, when placement
	// rewrote them for the host scheduler; flotilla-node forwards these to
	// the member instead of the rewritten ones.
	MemberConstraintsAnnotation = Prefix + "member-constraints"
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
	// FitGate is the scheduling gate that holds a pod in the host while no
	// cluster can run it.
	FitGate = Prefix + "fit"
	// ReasonMemberUnschedulable is the status reason of a host pod that
	// flotilla-node handed back because its member could not schedule it
	// (as a kubelet fails a pod it cannot admit with OutOfcpu), so that the
	// pod's controller creates a replacement elsewhere.
	ReasonMemberUnschedulable = "MemberUnschedulable"
	// VolumeDriver is the CSI driver name of the host PersistentVolumes
	// that stand for member volumes (offered by flotilla-node to claims,
	// or bound to them); each is labelled with ClusterLabel. No host node
	// runs the driver: such a volume can never be mounted by a real
	// kubelet.
	VolumeDriver = "volumes.flotilla.io"
)

// HostOnlyLabel reports whether a node label term key=value, seen on a pod
// that was placed on the virtual node nodeName, constrains only the choice of
// virtual node and so must not reach the member scheduler.
func HostOnlyLabel(key, value, nodeName string) bool {
	switch {
	case strings.HasPrefix(key, Prefix):
		return true
	case key == HostnameLabel:
		return value == nodeName
	case key == TypeLabel:
		return value == TypeValue
	case key == RoleLabel:
		return value == RoleValue
	}
	return false
}

// HostOnlyKey reports whether a node label key only exists on virtual nodes,
// whatever its value, e.g. as the topology key of a spread constraint.
func HostOnlyKey(key string) bool {
	return strings.HasPrefix(key, Prefix)
}

// HostOnlyToleration reports whether a toleration key only concerns virtual nodes.
func HostOnlyToleration(key string) bool {
	return key == ProviderTaintKey || strings.HasPrefix(key, Prefix)
}

// LeaderLeaseName is the host Lease that an active/standby pair of
// flotilla-nodes for one member contend for.
func LeaderLeaseName(cluster string) string { return "flotilla-node-" + cluster }

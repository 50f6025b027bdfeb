// Labels flotilla puts on virtual nodes and member objects, and the node
// labels that only make sense in the host.

package wellknown

import "strings"

const (
	// ClusterLabel names the virtual cluster on virtual nodes and on the member
	// objects flotilla creates for that virtual cluster.
	ClusterLabel = Prefix + "cluster"
	// ProviderLabel carries the configured cloud or site provider of a virtual node.
	ProviderLabel = Prefix + "provider"
	// MemberLabel on a virtual node names the member cluster it stands for
	// (flotilla-node's --cluster-name): the same for every label partition
	// of one member.
	MemberLabel = Prefix + "member"
	// InstallationLabel on a member object is the identity of the flotilla
	// installation (the host cluster) that created it, so that two hosts
	// sharing a member, or a cluster name, never adopt or delete each
	// other's objects.
	InstallationLabel = Prefix + "installation"
	// HostUIDLabel on a member pod is the UID of the host pod it was forwarded
	// from; it is the adoption key after a restart.
	HostUIDLabel = Prefix + "host-uid"
	// OfferForLabel marks a host PersistentVolume offered to one claim
	// (its UID) that is still unbound: the host scheduler binds the claim
	// to the offer of the cluster its pod goes to.
	OfferForLabel = Prefix + "offer-for"
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

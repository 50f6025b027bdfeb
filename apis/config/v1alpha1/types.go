package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GroupVersion is the apiVersion of a NodeConfig file.
const GroupVersion = "flotilla.io/v1alpha1"

// Kind is the kind of a NodeConfig file.
const Kind = "NodeConfig"

// NamespaceMapping says which member namespace a host namespace's objects go to.
type NamespaceMapping string

const (
	// SameName keeps the host namespace's name: the default for a whole cluster.
	SameName NamespaceMapping = "SameName"
	// Suffix appends the virtual cluster's name (`edge` → `edge-ke-beijing`):
	// the default for partitions, so that partitions of one member never
	// collide.
	Suffix NamespaceMapping = "Suffix"
)

// +kubebuilder:object:root=true

// NodeConfig configures one flotilla-node process.
type NodeConfig struct {
	metav1.TypeMeta `json:",inline"`

	// Placement holds the placement settings of every virtual cluster;
	// a virtual cluster's own Placement overrides them field by field.
	Placement *Placement `json:"placement,omitempty"`

	// StorageClasses maps a host storage class to the member storage
	// class that the member copies of its claims get, for every virtual
	// cluster; a virtual cluster's own StorageClasses override it class by
	// class. A class not listed keeps its name.
	StorageClasses map[string]string `json:"storageClasses,omitempty"`

	// VirtualClusters are the label partitions of the member, each
	// registered as a virtual node of its own. When empty, the whole member
	// is one virtual node named by --cluster-name.
	VirtualClusters []VirtualCluster `json:"virtualClusters,omitempty"`
}

// VirtualCluster is a label-selected slice of the member's nodes that the
// host sees as one cluster.
type VirtualCluster struct {
	// Name is the virtual node's name and the cluster name policies use.
	Name string `json:"name"`
	// NodeSelector picks the member nodes of this virtual cluster. It may be
	// empty only when there is a single virtual cluster.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Labels are extra labels of the virtual node.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints replace the default virtual node taint when set.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Region, Zone and Provider become the virtual node's topology and
	// flotilla.io/provider labels.
	Region   string `json:"region,omitempty"`
	Zone     string `json:"zone,omitempty"`
	Provider string `json:"provider,omitempty"`
	// NamespaceMapping defaults to Suffix for partitions and SameName for a
	// whole cluster.
	NamespaceMapping NamespaceMapping `json:"namespaceMapping,omitempty"`
	// KubeletPort is this virtual node's kubelet endpoint port; by default
	// the ports follow --kubelet-port in the order of the list.
	KubeletPort int32 `json:"kubeletPort,omitempty"`
	// Placement overrides the NodeConfig's placement settings for this
	// virtual cluster.
	Placement *Placement `json:"placement,omitempty"`
	// StorageClasses overrides the NodeConfig's storage class mapping for
	// this virtual cluster, class by class.
	StorageClasses map[string]string `json:"storageClasses,omitempty"`
}

// Placement says how placement treats a virtual cluster's pods.
type Placement struct {
	// HandBackAfter is how long a forwarded pod may stay unschedulable in
	// the member before flotilla-node hands it back to the host, so that
	// its controller makes a replacement that can go elsewhere. Default
	// 30s.
	HandBackAfter *metav1.Duration `json:"handBackAfter,omitempty"`
	// Growable says a node autoscaler adds nodes to this cluster for pods
	// Pending in it: a pod that fits no node anywhere but fits one this
	// cluster can add is sent here to wait for it.
	Growable *bool `json:"growable,omitempty"`
	// NodeProvisionTimeout replaces HandBackAfter in a growable cluster:
	// how long a pod waits for a node to be added. Default 10m.
	NodeProvisionTimeout *metav1.Duration `json:"nodeProvisionTimeout,omitempty"`
	// NodeShapes are the nodes the autoscaler can add. Empty means nodes
	// like the cluster's largest.
	NodeShapes []NodeShape `json:"nodeShapes,omitempty"`
}

// NodeShape is a kind of node an autoscaler can add.
type NodeShape struct {
	// Labels of the node.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints of the node.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Allocatable of the node; pods defaults to 110.
	Allocatable corev1.ResourceList `json:"allocatable"`
}

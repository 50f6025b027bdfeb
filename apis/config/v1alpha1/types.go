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
}

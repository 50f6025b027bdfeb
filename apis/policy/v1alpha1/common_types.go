package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceSelector picks resource templates by type and by name or labels.
type ResourceSelector struct {
	// APIVersion of the selected templates, e.g. apps/v1.
	// +required
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`

	// Kind of the selected templates, e.g. Deployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`

	// Namespace of the selected templates. Empty means the policy's own
	// namespace for a namespaced policy and every namespace for a
	// cluster-scoped one.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// Name of the selected template. Empty selects every template of the
	// kind; when set, labelSelector is not consulted.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// LabelSelector selects templates by their labels when name is empty.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// ClusterAffinity selects clusters (virtual nodes). All of its parts that
// are set must match; a cluster listed in exclude never matches.
type ClusterAffinity struct {
	// LabelSelector selects clusters by the labels of their virtual node.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// FieldSelector selects clusters by provider, region and zone.
	// +optional
	FieldSelector *FieldSelector `json:"fieldSelector,omitempty"`

	// ClusterNames lists the clusters to select.
	// +optional
	// +listType=atomic
	ClusterNames []string `json:"clusterNames,omitempty"`

	// ExcludeClusters lists clusters that are never selected.
	// +optional
	// +listType=atomic
	ExcludeClusters []string `json:"exclude,omitempty"`
}

// FieldSelector selects clusters by their provider, region and zone: on a
// virtual node, the flotilla.io/provider, topology.kubernetes.io/region and
// topology.kubernetes.io/zone labels.
type FieldSelector struct {
	// MatchExpressions must all hold for a cluster to match.
	// +optional
	// +listType=atomic
	MatchExpressions []FieldSelectorRequirement `json:"matchExpressions,omitempty"`
}

// ClusterField is a cluster field a FieldSelector can match.
// +kubebuilder:validation:Enum=provider;region;zone
type ClusterField string

// The cluster fields a FieldSelector can match.
const (
	ProviderField ClusterField = "provider"
	RegionField   ClusterField = "region"
	ZoneField     ClusterField = "zone"
)

// FieldSelectorOperator relates a cluster field to a set of values.
// +kubebuilder:validation:Enum=In;NotIn
type FieldSelectorOperator string

// The operators a FieldSelectorRequirement accepts.
const (
	FieldSelectorOpIn    FieldSelectorOperator = "In"
	FieldSelectorOpNotIn FieldSelectorOperator = "NotIn"
)

// FieldSelectorRequirement is one condition on a cluster field. It has the
// shape of a node selector requirement, restricted to what a field selector
// accepts.
type FieldSelectorRequirement struct {
	// Key is the cluster field: provider, region or zone.
	// +required
	Key ClusterField `json:"key"`

	// Operator is In or NotIn.
	// +required
	Operator FieldSelectorOperator `json:"operator"`

	// Values the field is compared with.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	Values []string `json:"values"`
}

// OverriderOperator is what an overrider does with its value.
type OverriderOperator string

// The overrider operators.
const (
	OverriderOpAdd     OverriderOperator = "add"
	OverriderOpRemove  OverriderOperator = "remove"
	OverriderOpReplace OverriderOperator = "replace"
)

// The condition types of a policy's status.
const (
	// ConditionReady is True when the policy is in effect: for a propagation
	// policy, when every template it matched is placed as decided; for an
	// override policy, when it has been accepted and is applied to the
	// objects it selects.
	ConditionReady = "Ready"
)

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=propagationpolicies,scope=Namespaced,shortName=pp,categories=flotilla
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Replicas",type=string,JSONPath=`.spec.placement.replicaScheduling.replicaSchedulingType`,description="How replicas are scheduled: Duplicated or Divided"
// +kubebuilder:printcolumn:name="Templates",type=integer,JSONPath=`.status.matchedTemplates`,description="Templates the policy places"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PropagationPolicy says in which clusters the resource templates of its
// namespace run, and how their replicas are shared among those clusters.
type PropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired placement.
	// +required
	Spec PropagationSpec `json:"spec"`

	// Status is the placement the controller decided and observes.
	// +optional
	Status PropagationPolicyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PropagationPolicyList is a list of PropagationPolicy.
type PropagationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PropagationPolicy `json:"items"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusterpropagationpolicies,scope=Cluster,shortName=cpp,categories=flotilla
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Replicas",type=string,JSONPath=`.spec.placement.replicaScheduling.replicaSchedulingType`,description="How replicas are scheduled: Duplicated or Divided"
// +kubebuilder:printcolumn:name="Templates",type=integer,JSONPath=`.status.matchedTemplates`,description="Templates the policy places"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterPropagationPolicy is a PropagationPolicy for templates of any
// namespace. A namespaced PropagationPolicy that matches a template takes
// precedence over any ClusterPropagationPolicy.
type ClusterPropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired placement.
	// +required
	Spec PropagationSpec `json:"spec"`

	// Status is the placement the controller decided and observes.
	// +optional
	Status PropagationPolicyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterPropagationPolicyList is a list of ClusterPropagationPolicy.
type ClusterPropagationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPropagationPolicy `json:"items"`
}

// PropagationSpec is the desired placement of the templates a policy selects.
//
// Of Karmada's other fields, flotilla accepts those whose stated value is
// what it does anyway and rejects every other value, and every field it
// does not implement, with a message naming the field: the apiserver would
// otherwise prune an unknown field and the policy would silently mean
// something else than its author wrote.
//
// +kubebuilder:validation:XValidation:rule="!has(self.propagateDeps) || self.propagateDeps",fieldPath=".propagateDeps",reason="FieldValueForbidden",message="false is not supported by flotilla: the ConfigMaps, Secrets and ServiceAccounts a forwarded pod uses always follow it to its cluster"
// +kubebuilder:validation:XValidation:rule="!has(self.association) || self.association",fieldPath=".association",reason="FieldValueForbidden",message="false is not supported by flotilla: the ConfigMaps, Secrets and ServiceAccounts a forwarded pod uses always follow it to its cluster"
// +kubebuilder:validation:XValidation:rule="!has(self.schedulerName) || self.schedulerName == 'default-scheduler'",fieldPath=".schedulerName",reason="FieldValueForbidden",message="only default-scheduler is supported by flotilla: the host cluster's scheduler places every pod"
// +kubebuilder:validation:XValidation:rule="!has(self.conflictResolution) || self.conflictResolution == 'Abort'",fieldPath=".conflictResolution",reason="FieldValueForbidden",message="only Abort is supported by flotilla: it never overwrites a member object it did not create"
// +kubebuilder:validation:XValidation:rule="!has(self.preserveResourcesOnDeletion) || !self.preserveResourcesOnDeletion",fieldPath=".preserveResourcesOnDeletion",reason="FieldValueForbidden",message="true is not supported by flotilla: member pods always go with their host pods"
// +kubebuilder:validation:XValidation:rule="!has(self.preemption)",fieldPath=".preemption",reason="FieldValueForbidden",message="not supported by flotilla"
// +kubebuilder:validation:XValidation:rule="!has(self.dependentOverrides)",fieldPath=".dependentOverrides",reason="FieldValueForbidden",message="not supported by flotilla"
// +kubebuilder:validation:XValidation:rule="!has(self.failover)",fieldPath=".failover",reason="FieldValueForbidden",message="not supported by flotilla"
// +kubebuilder:validation:XValidation:rule="!has(self.activationPreference)",fieldPath=".activationPreference",reason="FieldValueForbidden",message="not supported by flotilla"
// +kubebuilder:validation:XValidation:rule="!has(self.suspension)",fieldPath=".suspension",reason="FieldValueForbidden",message="not supported by flotilla"
// +kubebuilder:validation:XValidation:rule="!has(self.schedulePriority)",fieldPath=".schedulePriority",reason="FieldValueForbidden",message="not supported by flotilla"
type PropagationSpec struct {
	// ResourceSelectors pick the templates the policy places. At least one is
	// required: an empty list does not mean "everything".
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`

	// Placement says which clusters may run the templates and how replicas
	// are shared among them.
	// +optional
	Placement Placement `json:"placement,omitempty"`

	// Priority decides between several policies that match one template:
	// the higher value wins; on a tie the policy with the more specific
	// selector (name, then labelSelector, then kind only) wins, then the
	// policy whose name sorts first.
	// +optional
	// +kubebuilder:default=0
	Priority *int32 `json:"priority,omitempty"`

	// PropagateDeps may only be true: a forwarded pod's dependencies always
	// follow it to its cluster.
	// +optional
	PropagateDeps *bool `json:"propagateDeps,omitempty"`

	// Association is Karmada's older name for propagateDeps and, like it,
	// may only be true.
	// +optional
	Association *bool `json:"association,omitempty"`

	// SchedulerName may only be default-scheduler: the host cluster's
	// kube-scheduler places every pod.
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`

	// ConflictResolution may only be Abort: flotilla never updates or
	// deletes a member object it did not create.
	// +optional
	ConflictResolution string `json:"conflictResolution,omitempty"`

	// PreserveResourcesOnDeletion may only be false: member pods are deleted
	// with their host pods.
	// +optional
	PreserveResourcesOnDeletion *bool `json:"preserveResourcesOnDeletion,omitempty"`

	// The fields below are not supported and are rejected when set. Their
	// contents are not modelled: they only need a schema type so that the
	// CRD's validation rules can see them.

	// Preemption is not supported and is rejected when set.
	// +optional
	Preemption string `json:"preemption,omitempty"`

	// DependentOverrides is not supported and is rejected when set.
	// +optional
	// +listType=atomic
	DependentOverrides []string `json:"dependentOverrides,omitempty"`

	// Failover is not supported and is rejected when set.
	// +optional
	Failover *runtime.RawExtension `json:"failover,omitempty"`

	// ActivationPreference is not supported and is rejected when set.
	// +optional
	ActivationPreference string `json:"activationPreference,omitempty"`

	// Suspension is not supported and is rejected when set.
	// +optional
	Suspension *runtime.RawExtension `json:"suspension,omitempty"`

	// SchedulePriority is not supported and is rejected when set.
	// +optional
	SchedulePriority *runtime.RawExtension `json:"schedulePriority,omitempty"`
}

// Placement says which clusters may run a template and how its replicas
// are shared among them. Without clusterAffinity and clusterAffinities every
// cluster is a candidate.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.clusterAffinity) && has(self.clusterAffinities))",fieldPath=".clusterAffinities",reason="FieldValueForbidden",message="clusterAffinity and clusterAffinities are mutually exclusive"
type Placement struct {
	// ClusterAffinity restricts the candidate clusters.
	// +optional
	ClusterAffinity *ClusterAffinity `json:"clusterAffinity,omitempty"`

	// ClusterAffinities are groups of clusters tried in order: the first
	// group that can hold the replicas is used, and a later group only when
	// the earlier ones cannot.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=affinityName
	ClusterAffinities []ClusterAffinityTerm `json:"clusterAffinities,omitempty"`

	// ClusterTolerations let the templates' pods onto clusters whose virtual
	// nodes carry matching taints.
	// +optional
	// +listType=atomic
	ClusterTolerations []corev1.Toleration `json:"clusterTolerations,omitempty"`

	// SpreadConstraints spread the replicas over groups of clusters.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	SpreadConstraints []SpreadConstraint `json:"spreadConstraints,omitempty"`

	// ReplicaScheduling says how replicas are shared among the selected
	// clusters. When it is not set every selected cluster runs all replicas
	// (Duplicated).
	// +optional
	ReplicaScheduling *ReplicaSchedulingStrategy `json:"replicaScheduling,omitempty"`
}

// ClusterAffinityTerm is one named group of clusterAffinities.
type ClusterAffinityTerm struct {
	// AffinityName names the group, unique within the policy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	AffinityName string `json:"affinityName"`

	ClusterAffinity `json:",inline"`
}

// SpreadFieldValue is a cluster field replicas can be spread by.
// +kubebuilder:validation:Enum=cluster;region;zone;provider
type SpreadFieldValue string

// The fields replicas can be spread by.
const (
	SpreadByFieldCluster  SpreadFieldValue = "cluster"
	SpreadByFieldRegion   SpreadFieldValue = "region"
	SpreadByFieldZone     SpreadFieldValue = "zone"
	SpreadByFieldProvider SpreadFieldValue = "provider"
)

// SpreadConstraint groups clusters by a field or a label and bounds the
// number of groups the replicas are spread over. With neither spreadByField
// nor spreadByLabel, it groups by cluster.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.spreadByField) && has(self.spreadByLabel))",reason="FieldValueForbidden",fieldPath=".spreadByLabel",message="spreadByField and spreadByLabel are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="!has(self.maxGroups) || self.maxGroups == 0 || self.maxGroups >= (has(self.minGroups) ? self.minGroups : 1)",fieldPath=".maxGroups",reason="FieldValueInvalid",message="must not be less than minGroups"
type SpreadConstraint struct {
	// SpreadByField groups clusters by cluster, region, zone or provider.
	// +optional
	SpreadByField SpreadFieldValue `json:"spreadByField,omitempty"`

	// SpreadByLabel groups clusters by the value of this virtual node label.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	SpreadByLabel string `json:"spreadByLabel,omitempty"`

	// MaxGroups is the largest number of groups to use; 0 means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxGroups int32 `json:"maxGroups,omitempty"`

	// MinGroups is the smallest number of groups to use; defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinGroups int32 `json:"minGroups,omitempty"`
}

// ReplicaSchedulingType says whether each cluster runs all replicas or a share.
// +kubebuilder:validation:Enum=Duplicated;Divided
type ReplicaSchedulingType string

// The replica scheduling types.
const (
	// ReplicaSchedulingTypeDuplicated runs the template's full replica count
	// in every selected cluster.
	ReplicaSchedulingTypeDuplicated ReplicaSchedulingType = "Duplicated"
	// ReplicaSchedulingTypeDivided shares the template's replicas among the
	// selected clusters.
	ReplicaSchedulingTypeDivided ReplicaSchedulingType = "Divided"
)

// ReplicaDivisionPreference says how Divided replicas are shared.
// +kubebuilder:validation:Enum=Aggregated;Weighted
type ReplicaDivisionPreference string

// The replica division preferences.
const (
	// ReplicaDivisionPreferenceAggregated packs replicas into as few clusters
	// as their free capacity allows.
	ReplicaDivisionPreferenceAggregated ReplicaDivisionPreference = "Aggregated"
	// ReplicaDivisionPreferenceWeighted shares replicas in proportion to
	// weights.
	ReplicaDivisionPreferenceWeighted ReplicaDivisionPreference = "Weighted"
)

// ReplicaSchedulingStrategy says how a template's replicas are shared among
// the selected clusters.
//
// +kubebuilder:validation:XValidation:rule="!has(self.replicaSchedulingType) || self.replicaSchedulingType != 'Duplicated' || !has(self.replicaDivisionPreference)",fieldPath=".replicaDivisionPreference",reason="FieldValueForbidden",message="only applies when replicaSchedulingType is Divided"
// +kubebuilder:validation:XValidation:rule="!has(self.replicaSchedulingType) || self.replicaSchedulingType != 'Duplicated' || !has(self.weightPreference)",fieldPath=".weightPreference",reason="FieldValueForbidden",message="only applies when replicaSchedulingType is Divided"
// +kubebuilder:validation:XValidation:rule="!has(self.replicaDivisionPreference) || self.replicaDivisionPreference != 'Aggregated' || !has(self.weightPreference)",fieldPath=".weightPreference",reason="FieldValueForbidden",message="only applies when replicaDivisionPreference is Weighted"
type ReplicaSchedulingStrategy struct {
	// ReplicaSchedulingType is Duplicated or Divided; Divided by default.
	// +optional
	// +kubebuilder:default=Divided
	ReplicaSchedulingType ReplicaSchedulingType `json:"replicaSchedulingType,omitempty"`

	// ReplicaDivisionPreference says how Divided replicas are shared:
	// Aggregated or Weighted. Weighted when not set.
	// +optional
	ReplicaDivisionPreference ReplicaDivisionPreference `json:"replicaDivisionPreference,omitempty"`

	// WeightPreference gives the weights of Weighted division. When not set,
	// every selected cluster weighs the same.
	// +optional
	WeightPreference *ClusterPreferences `json:"weightPreference,omitempty"`
}

// ClusterPreferences gives the weights of Weighted division: static per
// cluster, or dynamic from the clusters' free capacity.
//
// +kubebuilder:validation:XValidation:rule="has(self.staticWeightList) != has(self.dynamicWeight)",reason="FieldValueRequired",message="exactly one of staticWeightList and dynamicWeight must be set"
type ClusterPreferences struct {
	// StaticWeightList gives weights to the clusters each item selects. A
	// selected cluster that no item matches gets no replicas.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	// +listType=atomic
	StaticWeightList []StaticClusterWeight `json:"staticWeightList,omitempty"`

	// DynamicWeight derives the weights from the clusters: AvailableReplicas
	// weighs each cluster by how many more replicas its free capacity holds.
	// +optional
	DynamicWeight DynamicWeightFactor `json:"dynamicWeight,omitempty"`
}

// StaticClusterWeight is the weight of the clusters one affinity selects.
type StaticClusterWeight struct {
	// TargetCluster selects the clusters that get this weight.
	// +required
	TargetCluster ClusterAffinity `json:"targetCluster"`

	// Weight is relative to the other items' weights.
	// +required
	// +kubebuilder:validation:Minimum=1
	Weight int64 `json:"weight"`
}

// DynamicWeightFactor is what dynamic weights are derived from.
// +kubebuilder:validation:Enum=AvailableReplicas
type DynamicWeightFactor string

// DynamicWeightByAvailableReplicas weighs each cluster by the number of
// replicas of the template its free capacity still holds.
const DynamicWeightByAvailableReplicas DynamicWeightFactor = "AvailableReplicas"

// PropagationPolicyStatus is what the controller decided and observes for a
// propagation policy.
type PropagationPolicyStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the policy; see ConditionReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// MatchedTemplates is the number of templates the policy places.
	// +optional
	MatchedTemplates int32 `json:"matchedTemplates,omitempty"`

	// Templates are the placements of at most 100 of the matched templates,
	// to keep the object small.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	Templates []TemplatePlacement `json:"templates,omitempty"`
}

// TemplatePlacement is where one template's replicas should run and run.
type TemplatePlacement struct {
	// APIVersion of the template.
	APIVersion string `json:"apiVersion"`
	// Kind of the template.
	Kind string `json:"kind"`
	// Namespace of the template.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the template.
	Name string `json:"name"`
	// Clusters selected for the template.
	// +optional
	// +listType=atomic
	Clusters []ClusterReplicas `json:"clusters,omitempty"`
}

// ClusterReplicas compares a cluster's target share of a template's
// replicas with what runs there.
type ClusterReplicas struct {
	// Name of the cluster.
	Name string `json:"name"`
	// DesiredReplicas is the cluster's target.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// CurrentReplicas is the number of the template's pods placed in the
	// cluster and not terminating.
	CurrentReplicas int32 `json:"currentReplicas"`
}

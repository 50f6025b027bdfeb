package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=overridepolicies,scope=Namespaced,shortName=op,categories=flotilla
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// OverridePolicy changes the objects of its namespace per target cluster
// as flotilla forwards them: pods, and the ConfigMaps, Secrets and Services
// that follow them.
type OverridePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what to change, and where.
	// +required
	Spec OverrideSpec `json:"spec"`

	// Status is what the controller observes.
	// +optional
	Status OverridePolicyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// OverridePolicyList is a list of OverridePolicy.
type OverridePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OverridePolicy `json:"items"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusteroverridepolicies,scope=Cluster,shortName=cop,categories=flotilla
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterOverridePolicy is an OverridePolicy for objects of any namespace.
// Cluster-scoped override policies are applied before namespaced ones.
type ClusterOverridePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what to change, and where.
	// +required
	Spec OverrideSpec `json:"spec"`

	// Status is what the controller observes.
	// +optional
	Status OverridePolicyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterOverridePolicyList is a list of ClusterOverridePolicy.
type ClusterOverridePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterOverridePolicy `json:"items"`
}

// OverrideSpec says which objects to change, in which clusters, and how.
// Either overrideRules, or the older targetCluster and overriders pair.
//
// +kubebuilder:validation:XValidation:rule="!has(self.overrideRules) || !has(self.targetCluster)",fieldPath=".targetCluster",reason="FieldValueForbidden",message="targetCluster and overriders cannot be used with overrideRules: move them into a rule"
// +kubebuilder:validation:XValidation:rule="!has(self.overrideRules) || !has(self.overriders) || !(has(self.overriders.plaintext) || has(self.overriders.imageOverrider) || has(self.overriders.commandOverrider) || has(self.overriders.argsOverrider) || has(self.overriders.labelsOverrider) || has(self.overriders.annotationsOverrider) || has(self.overriders.fieldOverrider))",fieldPath=".overriders",reason="FieldValueForbidden",message="targetCluster and overriders cannot be used with overrideRules: move them into a rule"
type OverrideSpec struct {
	// ResourceSelectors pick the objects to change; when empty, every object
	// of the policy's scope is changed.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	ResourceSelectors []ResourceSelector `json:"resourceSelectors,omitempty"`

	// OverrideRules are applied in order, each for the clusters its
	// targetCluster selects.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	OverrideRules []RuleWithCluster `json:"overrideRules,omitempty"`

	// TargetCluster selects the clusters in which overriders apply; all
	// clusters when not set. Karmada's older form of one override rule.
	// +optional
	TargetCluster *ClusterAffinity `json:"targetCluster,omitempty"`

	// Overriders are the changes for targetCluster. Karmada's older form of
	// one override rule.
	// +optional
	Overriders *Overriders `json:"overriders,omitempty"`
}

// RuleWithCluster is a set of changes for the clusters one affinity selects.
type RuleWithCluster struct {
	// TargetCluster selects the clusters in which the rule applies; all
	// clusters when not set.
	// +optional
	TargetCluster *ClusterAffinity `json:"targetCluster,omitempty"`

	// Overriders are the changes.
	// +required
	Overriders Overriders `json:"overriders"`
}

// Overriders are the changes of one rule. Within a rule they are applied in
// this order, each list in its own order: imageOverrider, commandOverrider,
// argsOverrider, labelsOverrider, annotationsOverrider, plaintext.
//
// +kubebuilder:validation:XValidation:rule="!has(self.fieldOverrider)",fieldPath=".fieldOverrider",reason="FieldValueForbidden",message="not supported by flotilla"
type Overriders struct {
	// Plaintext are JSON patch operations on the object.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Plaintext []PlaintextOverrider `json:"plaintext,omitempty"`

	// ImageOverrider changes parts of container images.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	ImageOverrider []ImageOverrider `json:"imageOverrider,omitempty"`

	// CommandOverrider changes the command of named containers.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	CommandOverrider []CommandArgsOverrider `json:"commandOverrider,omitempty"`

	// ArgsOverrider changes the args of named containers.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	ArgsOverrider []CommandArgsOverrider `json:"argsOverrider,omitempty"`

	// LabelsOverrider changes the object's labels.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	LabelsOverrider []LabelAnnotationOverrider `json:"labelsOverrider,omitempty"`

	// AnnotationsOverrider changes the object's annotations.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	AnnotationsOverrider []LabelAnnotationOverrider `json:"annotationsOverrider,omitempty"`

	// FieldOverrider is not supported and is rejected when set; its items
	// are not modelled.
	// +optional
	// +listType=atomic
	FieldOverrider []runtime.RawExtension `json:"fieldOverrider,omitempty"`
}

// PlaintextOverrider is one JSON patch operation (add, remove or replace).
//
// (Value takes any JSON, so the schema cannot see it; the policy webhook
// checks that add and replace have one and remove has none.)
//
// +kubebuilder:validation:XValidation:rule="self.path.matches('^(/([^~/]|~[01])*)+$')",fieldPath=".path",reason="FieldValueInvalid",message="must be a JSON pointer such as /spec/containers/0/image"
type PlaintextOverrider struct {
	// Path is a JSON pointer (RFC 6901) to the field to change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Path string `json:"path"`

	// Operator is add, remove or replace.
	// +required
	// +kubebuilder:validation:Enum=add;remove;replace
	Operator OverriderOperator `json:"operator"`

	// Value is the new value for add and replace.
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`
}

// ImageComponent is a part of an image reference [registry/]repository[:tag].
// +kubebuilder:validation:Enum=Registry;Repository;Tag
type ImageComponent string

// The parts of an image reference.
const (
	// Registry is the host (and port) of an image, e.g. registry.example:5000.
	Registry ImageComponent = "Registry"
	// Repository is the path of an image without its registry, e.g. library/nginx.
	Repository ImageComponent = "Repository"
	// Tag is an image's tag, e.g. 1.27, or its digest, e.g. sha256:0123….
	Tag ImageComponent = "Tag"
)

// ImageOverrider changes one part of container images: add appends the
// value to the part, remove removes the part, replace sets it.
//
// +kubebuilder:validation:XValidation:rule="self.operator == 'remove' || (has(self.value) && size(self.value) > 0)",fieldPath=".value",reason="FieldValueRequired",message="required when operator is add or replace"
// +kubebuilder:validation:XValidation:rule="self.operator != 'remove' || !has(self.value) || size(self.value) == 0",fieldPath=".value",reason="FieldValueForbidden",message="must not be set when operator is remove"
// +kubebuilder:validation:XValidation:rule="self.component != 'Repository' || self.operator != 'remove'",fieldPath=".operator",reason="FieldValueForbidden",message="an image cannot lose its repository: use replace"
type ImageOverrider struct {
	// Predicate restricts the overrider to the image at one path. Without
	// it, the images of all containers (not init containers) of a pod or a
	// workload's pod template are changed.
	// +optional
	Predicate *ImagePredicate `json:"predicate,omitempty"`

	// Component is the part of the image to change.
	// +required
	Component ImageComponent `json:"component"`

	// Operator is add, remove or replace.
	// +required
	// +kubebuilder:validation:Enum=add;remove;replace
	Operator OverriderOperator `json:"operator"`

	// Value is what to add or the replacement.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Value string `json:"value,omitempty"`
}

// ImagePredicate selects one image field.
type ImagePredicate struct {
	// Path is a JSON pointer to an image field, e.g.
	// /spec/template/spec/containers/0/image.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^(/([^~/]|~[01])*)+$')",reason="FieldValueInvalid",message="must be a JSON pointer such as /spec/containers/0/image"
	Path string `json:"path"`
}

// CommandArgsOverrider changes the command or args of one container: add
// appends the values, remove deletes every item equal to one of them.
type CommandArgsOverrider struct {
	// ContainerName is the container to change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ContainerName string `json:"containerName"`

	// Operator is add or remove.
	// +required
	// +kubebuilder:validation:Enum=add;remove
	Operator OverriderOperator `json:"operator"`

	// Value are the items to append or remove.
	// +optional
	// +listType=atomic
	Value []string `json:"value,omitempty"`
}

// LabelAnnotationOverrider changes labels or annotations: add sets the
// given keys, replace sets those of them that exist, remove deletes those of
// them that exist (their values are not compared).
type LabelAnnotationOverrider struct {
	// Operator is add, remove or replace.
	// +required
	// +kubebuilder:validation:Enum=add;remove;replace
	Operator OverriderOperator `json:"operator"`

	// Value are the keys and values.
	// +optional
	Value map[string]string `json:"value,omitempty"`
}

// OverridePolicyStatus is what the controller observes for an override policy.
type OverridePolicyStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the policy; see ConditionReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

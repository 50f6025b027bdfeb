// Package validation checks flotilla policies beyond what their CRD schema
// can: the semantic errors (a selector of a kind flotilla does not place, an
// unknown operator, a JSON patch path that is not a JSON pointer, weights
// that Duplicated replicas would ignore...) and, once more, the Karmada
// fields flotilla does not implement. It is pure: the policy webhook calls
// it, and so can anything that builds policies in Go. Errors carry the path
// of the offending field, e.g. spec.placement.replicaScheduling.weightPreference.
package validation

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/workload"
)

// Messages shared with the CRD's validation rules, so that a field is
// rejected in the same words with or without the policy webhook.
const (
	// MsgNotSupported rejects a Karmada field flotilla does not implement.
	MsgNotSupported = "not supported by flotilla"
	// MsgDepsAlwaysFollow rejects propagateDeps or association set to false.
	MsgDepsAlwaysFollow = "false is not supported by flotilla: the ConfigMaps, Secrets and ServiceAccounts a forwarded pod uses always follow it to its cluster"
	// MsgSchedulerName rejects a schedulerName other than default-scheduler.
	MsgSchedulerName = "only default-scheduler is supported by flotilla: the host cluster's scheduler places every pod"
	// MsgConflictResolution rejects a conflictResolution other than Abort.
	MsgConflictResolution = "only Abort is supported by flotilla: it never overwrites a member object it did not create"
	// MsgPreserveResources rejects preserveResourcesOnDeletion: true.
	MsgPreserveResources = "true is not supported by flotilla: member pods always go with their host pods"
	// MsgAffinityExclusive rejects clusterAffinity together with clusterAffinities.
	MsgAffinityExclusive = "clusterAffinity and clusterAffinities are mutually exclusive"
	// MsgSpreadExclusive rejects spreadByField together with spreadByLabel.
	MsgSpreadExclusive = "spreadByField and spreadByLabel are mutually exclusive"
	// MsgMaxGroups rejects maxGroups below minGroups.
	MsgMaxGroups = "must not be less than minGroups"
	// MsgOnlyDivided rejects division settings on Duplicated replicas.
	MsgOnlyDivided = "only applies when replicaSchedulingType is Divided"
	// MsgOnlyWeighted rejects weights on Aggregated division.
	MsgOnlyWeighted = "only applies when replicaDivisionPreference is Weighted"
	// MsgOneWeight rejects a weightPreference with both or neither of its parts.
	MsgOneWeight = "exactly one of staticWeightList and dynamicWeight must be set"
	// MsgRulesExclusive rejects the older targetCluster/overriders pair next to overrideRules.
	MsgRulesExclusive = "targetCluster and overriders cannot be used with overrideRules: move them into a rule"
	// MsgJSONPointer rejects a path that is not a JSON pointer.
	MsgJSONPointer = "must be a JSON pointer such as /spec/containers/0/image"
	// MsgValueRequired rejects an add or replace without a value.
	MsgValueRequired = "required when operator is add or replace"
	// MsgValueForbidden rejects a remove with a value.
	MsgValueForbidden = "must not be set when operator is remove"
	// MsgKeepRepository rejects removing an image's repository.
	MsgKeepRepository = "an image cannot lose its repository: use replace"
)

// ValidatePropagationPolicy checks a PropagationPolicy: its selectors may
// only reach templates of its own namespace.
func ValidatePropagationPolicy(p *v1alpha1.PropagationPolicy) field.ErrorList {
	return validatePropagationSpec(&p.Spec, p.Namespace, field.NewPath("spec"))
}

// ValidateClusterPropagationPolicy checks a ClusterPropagationPolicy.
func ValidateClusterPropagationPolicy(p *v1alpha1.ClusterPropagationPolicy) field.ErrorList {
	return validatePropagationSpec(&p.Spec, "", field.NewPath("spec"))
}

// ValidateOverridePolicy checks an OverridePolicy: its selectors may only
// reach objects of its own namespace.
func ValidateOverridePolicy(p *v1alpha1.OverridePolicy) field.ErrorList {
	return validateOverrideSpec(&p.Spec, p.Namespace, field.NewPath("spec"))
}

// ValidateClusterOverridePolicy checks a ClusterOverridePolicy.
func ValidateClusterOverridePolicy(p *v1alpha1.ClusterOverridePolicy) field.ErrorList {
	return validateOverrideSpec(&p.Spec, "", field.NewPath("spec"))
}

// validatePropagationSpec checks a propagation spec; policyNamespace is
// empty for a cluster-scoped policy.
func validatePropagationSpec(spec *v1alpha1.PropagationSpec, policyNamespace string, p *field.Path) field.ErrorList {
	errs := unsupportedPropagationFields(spec, p)
	if len(spec.ResourceSelectors) == 0 {
		errs = append(errs, field.Required(p.Child("resourceSelectors"), "at least one selector is required: an empty list does not select everything"))
	}
	errs = append(errs, validateResourceSelectors(spec.ResourceSelectors, policyNamespace, p.Child("resourceSelectors"))...)
	errs = append(errs, validatePlacement(&spec.Placement, p.Child("placement"))...)
	return errs
}

func unsupportedPropagationFields(spec *v1alpha1.PropagationSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.PropagateDeps != nil && !*spec.PropagateDeps {
		errs = append(errs, field.Forbidden(p.Child("propagateDeps"), MsgDepsAlwaysFollow))
	}
	if spec.Association != nil && !*spec.Association {
		errs = append(errs, field.Forbidden(p.Child("association"), MsgDepsAlwaysFollow))
	}
	if spec.SchedulerName != "" && spec.SchedulerName != corev1.DefaultSchedulerName {
		errs = append(errs, field.Forbidden(p.Child("schedulerName"), MsgSchedulerName))
	}
	if spec.ConflictResolution != "" && spec.ConflictResolution != "Abort" {
		errs = append(errs, field.Forbidden(p.Child("conflictResolution"), MsgConflictResolution))
	}
	if spec.PreserveResourcesOnDeletion != nil && *spec.PreserveResourcesOnDeletion {
		errs = append(errs, field.Forbidden(p.Child("preserveResourcesOnDeletion"), MsgPreserveResources))
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"preemption", spec.Preemption != ""},
		{"dependentOverrides", len(spec.DependentOverrides) > 0},
		{"failover", spec.Failover != nil},
		{"activationPreference", spec.ActivationPreference != ""},
		{"suspension", spec.Suspension != nil},
		{"schedulePriority", spec.SchedulePriority != nil},
	} {
		if f.set {
			errs = append(errs, field.Forbidden(p.Child(f.name), MsgNotSupported))
		}
	}
	return errs
}

// forwardedKinds are the objects that follow pods into their clusters and
// may be selected as themselves, beside the workloads flotilla places.
var forwardedKinds = []string{"v1 ConfigMap", "v1 Secret", "v1 Service"}

// supportedKinds are the kinds a resource selector may name: the workloads
// flotilla places and the objects that follow their pods.
func supportedKinds() []string {
	var out []string
	for _, a := range workload.All() {
		gvk := a.GroupVersionKind()
		out = append(out, gvk.GroupVersion().String()+" "+gvk.Kind)
	}
	return append(out, forwardedKinds...)
}

// MsgDaemonSet says why a policy may not select a DaemonSet, and what to do
// instead (docs/policies.md has the whole decision).
const MsgDaemonSet = "flotilla does not place DaemonSets: on the host a DaemonSet runs one pod per virtual node, " +
	"that is one per cluster, not one per node of the clusters as its users mean; " +
	"install the DaemonSet in each member cluster instead, for example with its Helm chart"

func validateResourceSelectors(selectors []v1alpha1.ResourceSelector, policyNamespace string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	kinds := supportedKinds()
	supported := sets.New(kinds...)
	for i := range selectors {
		rs, ip := &selectors[i], p.Index(i)
		switch {
		case rs.APIVersion == "":
			errs = append(errs, field.Required(ip.Child("apiVersion"), ""))
		case rs.Kind == "":
			errs = append(errs, field.Required(ip.Child("kind"), ""))
		case rs.APIVersion == "apps/v1" && rs.Kind == "DaemonSet":
			errs = append(errs, field.Invalid(ip.Child("kind"), rs.Kind, MsgDaemonSet))
		case !supported.Has(rs.APIVersion + " " + rs.Kind):
			errs = append(errs, field.Invalid(ip.Child("kind"), rs.Kind, fmt.Sprintf(
				"apiVersion %s kind %s is not supported by flotilla, which places %s",
				rs.APIVersion, rs.Kind, strings.Join(kinds, ", "))))
		}
		if rs.Namespace != "" {
			if policyNamespace != "" && rs.Namespace != policyNamespace {
				errs = append(errs, field.Invalid(ip.Child("namespace"), rs.Namespace,
					fmt.Sprintf("a namespaced policy only selects objects of its own namespace %q; use a cluster-scoped policy for others", policyNamespace)))
			} else {
				for _, msg := range utilvalidation.IsDNS1123Label(rs.Namespace) {
					errs = append(errs, field.Invalid(ip.Child("namespace"), rs.Namespace, msg))
				}
			}
		}
		errs = append(errs, validateLabelSelector(rs.LabelSelector, ip.Child("labelSelector"))...)
	}
	return errs
}

func validateLabelSelector(s *metav1.LabelSelector, p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, p)
}

func validatePlacement(pl *v1alpha1.Placement, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pl.ClusterAffinity != nil && len(pl.ClusterAffinities) > 0 {
		errs = append(errs, field.Forbidden(p.Child("clusterAffinities"), MsgAffinityExclusive))
	}
	errs = append(errs, validateClusterAffinity(pl.ClusterAffinity, p.Child("clusterAffinity"))...)
	names := sets.New[string]()
	for i := range pl.ClusterAffinities {
		term, ip := &pl.ClusterAffinities[i], p.Child("clusterAffinities").Index(i)
		np := ip.Child("affinityName")
		switch {
		case term.AffinityName == "":
			errs = append(errs, field.Required(np, ""))
		case len(term.AffinityName) > 32:
			errs = append(errs, field.TooLong(np, term.AffinityName, 32))
		case names.Has(term.AffinityName):
			errs = append(errs, field.Duplicate(np, term.AffinityName))
		default:
			for _, msg := range utilvalidation.IsQualifiedName(term.AffinityName) {
				errs = append(errs, field.Invalid(np, term.AffinityName, msg))
			}
		}
		names.Insert(term.AffinityName)
		errs = append(errs, validateClusterAffinity(&term.ClusterAffinity, ip)...)
	}
	for i := range pl.ClusterTolerations {
		errs = append(errs, validateToleration(&pl.ClusterTolerations[i], p.Child("clusterTolerations").Index(i))...)
	}
	errs = append(errs, validateSpreadConstraints(pl.SpreadConstraints, p.Child("spreadConstraints"))...)
	errs = append(errs, validateReplicaScheduling(pl.ReplicaScheduling, p.Child("replicaScheduling"))...)
	return errs
}

// validateClusterAffinity checks an affinity; nil is valid (every cluster).
func validateClusterAffinity(a *v1alpha1.ClusterAffinity, p *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	errs := validateLabelSelector(a.LabelSelector, p.Child("labelSelector"))
	if a.FieldSelector != nil {
		for i, req := range a.FieldSelector.MatchExpressions {
			ip := p.Child("fieldSelector", "matchExpressions").Index(i)
			switch req.Key {
			case v1alpha1.ProviderField, v1alpha1.RegionField, v1alpha1.ZoneField:
			default:
				errs = append(errs, field.NotSupported(ip.Child("key"), req.Key, []v1alpha1.ClusterField{
					v1alpha1.ProviderField, v1alpha1.RegionField, v1alpha1.ZoneField}))
			}
			switch req.Operator {
			case v1alpha1.FieldSelectorOpIn, v1alpha1.FieldSelectorOpNotIn:
			default:
				errs = append(errs, field.NotSupported(ip.Child("operator"), req.Operator, []v1alpha1.FieldSelectorOperator{
					v1alpha1.FieldSelectorOpIn, v1alpha1.FieldSelectorOpNotIn}))
			}
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(ip.Child("values"), "In and NotIn compare with at least one value"))
			}
		}
	}
	errs = append(errs, validateClusterNames(a.ClusterNames, p.Child("clusterNames"))...)
	errs = append(errs, validateClusterNames(a.ExcludeClusters, p.Child("exclude"))...)
	return errs
}

// validateClusterNames rejects names no virtual node can have: such a name
// would silently match nothing.
func validateClusterNames(names []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, n := range names {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(n) {
			errs = append(errs, field.Invalid(p.Index(i), n, "not a cluster (virtual node) name: "+msg))
		}
	}
	return errs
}

// emptyAffinity reports whether an affinity has no restriction at all, so
// that it matches every cluster.
func emptyAffinity(a *v1alpha1.ClusterAffinity) bool {
	return a.LabelSelector == nil && a.FieldSelector == nil && len(a.ClusterNames) == 0 && len(a.ExcludeClusters) == 0
}

// validateToleration applies the rules the apiserver applies to a pod's
// tolerations, since these become the pods' tolerations.
func validateToleration(t *corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "must be Exists when key is empty, to tolerate every taint"))
		}
		for _, msg := range utilvalidation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []corev1.TaintEffect{
			corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "must be NoExecute when tolerationSeconds is set"))
	}
	return errs
}

func validateSpreadConstraints(cs []v1alpha1.SpreadConstraint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	byField := sets.New[v1alpha1.SpreadFieldValue]()
	for i := range cs {
		c, ip := &cs[i], p.Index(i)
		if c.SpreadByField != "" && c.SpreadByLabel != "" {
			errs = append(errs, field.Forbidden(ip.Child("spreadByLabel"), MsgSpreadExclusive))
		}
		switch c.SpreadByField {
		case "":
		case v1alpha1.SpreadByFieldCluster, v1alpha1.SpreadByFieldRegion, v1alpha1.SpreadByFieldZone, v1alpha1.SpreadByFieldProvider:
			if byField.Has(c.SpreadByField) {
				errs = append(errs, field.Duplicate(ip.Child("spreadByField"), c.SpreadByField))
			}
			byField.Insert(c.SpreadByField)
		default:
			errs = append(errs, field.NotSupported(ip.Child("spreadByField"), c.SpreadByField, []v1alpha1.SpreadFieldValue{
				v1alpha1.SpreadByFieldCluster, v1alpha1.SpreadByFieldRegion, v1alpha1.SpreadByFieldZone, v1alpha1.SpreadByFieldProvider}))
		}
		if c.SpreadByLabel != "" {
			errs = append(errs, metav1validation.ValidateLabelName(c.SpreadByLabel, ip.Child("spreadByLabel"))...)
		}
		if c.MinGroups < 0 {
			errs = append(errs, field.Invalid(ip.Child("minGroups"), c.MinGroups, utilvalidation.InclusiveRangeError(0, 1<<31-1)))
		}
		if c.MaxGroups < 0 {
			errs = append(errs, field.Invalid(ip.Child("maxGroups"), c.MaxGroups, utilvalidation.InclusiveRangeError(0, 1<<31-1)))
		}
		if c.MaxGroups > 0 && c.MaxGroups < max(c.MinGroups, 1) {
			errs = append(errs, field.Invalid(ip.Child("maxGroups"), c.MaxGroups, MsgMaxGroups))
		}
	}
	// Groups of regions, zones or providers say nothing about how many
	// clusters to use within them; Karmada requires a cluster constraint
	// for that, and so does flotilla, with the same meaning.
	if byField.Len() > 0 && !byField.Has(v1alpha1.SpreadByFieldCluster) {
		errs = append(errs, field.Required(p, "spreading by region, zone or provider also needs a spreadByField: cluster constraint, which bounds the number of clusters"))
	}
	return errs
}

func validateReplicaScheduling(rs *v1alpha1.ReplicaSchedulingStrategy, p *field.Path) field.ErrorList {
	if rs == nil {
		return nil
	}
	var errs field.ErrorList
	divided := true
	switch rs.ReplicaSchedulingType {
	case "", v1alpha1.ReplicaSchedulingTypeDivided:
	case v1alpha1.ReplicaSchedulingTypeDuplicated:
		divided = false
		if rs.ReplicaDivisionPreference != "" {
			errs = append(errs, field.Forbidden(p.Child("replicaDivisionPreference"), MsgOnlyDivided))
		}
		if rs.WeightPreference != nil {
			errs = append(errs, field.Forbidden(p.Child("weightPreference"), MsgOnlyDivided))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("replicaSchedulingType"), rs.ReplicaSchedulingType, []v1alpha1.ReplicaSchedulingType{
			v1alpha1.ReplicaSchedulingTypeDuplicated, v1alpha1.ReplicaSchedulingTypeDivided}))
	}
	switch rs.ReplicaDivisionPreference {
	case "", v1alpha1.ReplicaDivisionPreferenceWeighted:
	case v1alpha1.ReplicaDivisionPreferenceAggregated:
		if rs.WeightPreference != nil {
			errs = append(errs, field.Forbidden(p.Child("weightPreference"), MsgOnlyWeighted))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("replicaDivisionPreference"), rs.ReplicaDivisionPreference, []v1alpha1.ReplicaDivisionPreference{
			v1alpha1.ReplicaDivisionPreferenceAggregated, v1alpha1.ReplicaDivisionPreferenceWeighted}))
	}
	if w := rs.WeightPreference; w != nil && divided {
		errs = append(errs, validateWeights(w, p.Child("weightPreference"))...)
	}
	return errs
}

func validateWeights(w *v1alpha1.ClusterPreferences, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (len(w.StaticWeightList) > 0) == (w.DynamicWeight != "") {
		errs = append(errs, field.Invalid(p, describeWeights(w), MsgOneWeight))
	}
	switch w.DynamicWeight {
	case "", v1alpha1.DynamicWeightByAvailableReplicas:
	default:
		errs = append(errs, field.NotSupported(p.Child("dynamicWeight"), w.DynamicWeight, []v1alpha1.DynamicWeightFactor{v1alpha1.DynamicWeightByAvailableReplicas}))
	}
	for i := range w.StaticWeightList {
		sw, ip := &w.StaticWeightList[i], p.Child("staticWeightList").Index(i)
		if sw.Weight < 1 {
			errs = append(errs, field.Invalid(ip.Child("weight"), sw.Weight, "must be at least 1"))
		}
		if emptyAffinity(&sw.TargetCluster) {
			errs = append(errs, field.Required(ip.Child("targetCluster"), "must select clusters by clusterNames, labelSelector or fieldSelector"))
		}
		errs = append(errs, validateClusterAffinity(&sw.TargetCluster, ip.Child("targetCluster"))...)
	}
	return errs
}

func describeWeights(w *v1alpha1.ClusterPreferences) string {
	switch {
	case len(w.StaticWeightList) > 0 && w.DynamicWeight != "":
		return "staticWeightList and dynamicWeight"
	case len(w.StaticWeightList) > 0:
		return "staticWeightList"
	case w.DynamicWeight != "":
		return "dynamicWeight"
	}
	return "neither staticWeightList nor dynamicWeight"
}

// validateOverrideSpec checks an override spec; policyNamespace is empty
// for a cluster-scoped policy.
func validateOverrideSpec(spec *v1alpha1.OverrideSpec, policyNamespace string, p *field.Path) field.ErrorList {
	errs := validateResourceSelectors(spec.ResourceSelectors, policyNamespace, p.Child("resourceSelectors"))
	workloads := onlyWorkloads(spec.ResourceSelectors)
	if len(spec.OverrideRules) > 0 {
		if spec.TargetCluster != nil {
			errs = append(errs, field.Forbidden(p.Child("targetCluster"), MsgRulesExclusive))
		}
		if spec.Overriders != nil && !emptyOverriders(spec.Overriders) {
			errs = append(errs, field.Forbidden(p.Child("overriders"), MsgRulesExclusive))
		}
	}
	for i := range spec.OverrideRules {
		r, ip := &spec.OverrideRules[i], p.Child("overrideRules").Index(i)
		errs = append(errs, validateClusterAffinity(r.TargetCluster, ip.Child("targetCluster"))...)
		errs = append(errs, validateOverriders(&r.Overriders, workloads, ip.Child("overriders"))...)
	}
	errs = append(errs, validateClusterAffinity(spec.TargetCluster, p.Child("targetCluster"))...)
	if spec.Overriders != nil {
		errs = append(errs, validateOverriders(spec.Overriders, workloads, p.Child("overriders"))...)
	}
	return errs
}

// onlyWorkloads returns the selectors when they select only workloads, and
// nil when they also select objects that are forwarded as themselves (or
// everything, when there are none).
func onlyWorkloads(selectors []v1alpha1.ResourceSelector) []v1alpha1.ResourceSelector {
	for _, rs := range selectors {
		if workload.PodTemplatePath(rs.APIVersion, rs.Kind) == "" {
			return nil
		}
	}
	return selectors
}

// reachesPods rejects a path that no pod of the workloads has: flotilla
// forwards a workload's pods, never the workload, so a path such as
// /spec/replicas has nothing to change.
func reachesPods(workloads []v1alpha1.ResourceSelector, path string, p *field.Path) field.ErrorList {
	if path == "/metadata" || strings.HasPrefix(path, "/metadata/") {
		return nil
	}
	for _, rs := range workloads {
		if prefix := workload.PodTemplatePath(rs.APIVersion, rs.Kind); !strings.HasPrefix(path, prefix+"/") {
			return field.ErrorList{field.Invalid(p, path, fmt.Sprintf(
				"flotilla forwards a %s's pods, not the %s: only paths under /metadata/ and %s/ reach them",
				rs.Kind, rs.Kind, prefix))}
		}
	}
	return nil
}

func emptyOverriders(o *v1alpha1.Overriders) bool {
	return len(o.Plaintext) == 0 && len(o.ImageOverrider) == 0 && len(o.CommandOverrider) == 0 &&
		len(o.ArgsOverrider) == 0 && len(o.LabelsOverrider) == 0 && len(o.AnnotationsOverrider) == 0 &&
		len(o.FieldOverrider) == 0
}

// validateOverriders checks one rule's overriders; workloads are the
// policy's selectors when it selects only workloads.
func validateOverriders(o *v1alpha1.Overriders, workloads []v1alpha1.ResourceSelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(o.FieldOverrider) > 0 {
		errs = append(errs, field.Forbidden(p.Child("fieldOverrider"), MsgNotSupported))
	}
	for i := range o.Plaintext {
		errs = append(errs, validatePlaintext(&o.Plaintext[i], workloads, p.Child("plaintext").Index(i))...)
	}
	for i := range o.ImageOverrider {
		errs = append(errs, validateImageOverrider(&o.ImageOverrider[i], workloads, p.Child("imageOverrider").Index(i))...)
	}
	for i := range o.CommandOverrider {
		errs = append(errs, validateCommandArgs(&o.CommandOverrider[i], p.Child("commandOverrider").Index(i))...)
	}
	for i := range o.ArgsOverrider {
		errs = append(errs, validateCommandArgs(&o.ArgsOverrider[i], p.Child("argsOverrider").Index(i))...)
	}
	for i := range o.LabelsOverrider {
		ip := p.Child("labelsOverrider").Index(i)
		errs = append(errs, validateLabelAnnotationOperator(o.LabelsOverrider[i].Operator, ip.Child("operator"))...)
		errs = append(errs, metav1validation.ValidateLabels(o.LabelsOverrider[i].Value, ip.Child("value"))...)
		errs = append(errs, flotillaKeys(o.LabelsOverrider[i].Value, ip.Child("value"))...)
	}
	for i := range o.AnnotationsOverrider {
		ip := p.Child("annotationsOverrider").Index(i)
		errs = append(errs, validateLabelAnnotationOperator(o.AnnotationsOverrider[i].Operator, ip.Child("operator"))...)
		errs = append(errs, apivalidation.ValidateAnnotations(o.AnnotationsOverrider[i].Value, ip.Child("value"))...)
		errs = append(errs, flotillaKeys(o.AnnotationsOverrider[i].Value, ip.Child("value"))...)
	}
	return errs
}

var allOperators = []v1alpha1.OverriderOperator{v1alpha1.OverriderOpAdd, v1alpha1.OverriderOpRemove, v1alpha1.OverriderOpReplace}

func validateLabelAnnotationOperator(op v1alpha1.OverriderOperator, p *field.Path) field.ErrorList {
	switch op {
	case v1alpha1.OverriderOpAdd, v1alpha1.OverriderOpRemove, v1alpha1.OverriderOpReplace:
		return nil
	}
	return field.ErrorList{field.NotSupported(p, op, allOperators)}
}

// flotillaKeys rejects labels and annotations under flotilla.io/: flotilla
// sets those itself to tie member objects to their host objects.
func flotillaKeys(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sets.List(sets.KeySet(m)) {
		if strings.HasPrefix(k, wellknown.Prefix) {
			errs = append(errs, field.Forbidden(p.Key(k), "keys under "+wellknown.Prefix+" are flotilla's own"))
		}
	}
	return errs
}

// jsonPointer matches an RFC 6901 pointer to something below the document
// root: every ~ escapes / (~1) or ~ (~0).
var jsonPointer = regexp.MustCompile(`^(/([^~/]|~[01])*)+$`)

// reservedPaths are the fields that name an object; flotilla keeps them so
// that it can find the object again. /status belongs to the member.
var reservedPaths = []string{"/apiVersion", "/kind", "/metadata", "/metadata/name", "/metadata/generateName", "/metadata/namespace", "/metadata/uid"}

func validatePlaintext(o *v1alpha1.PlaintextOverrider, workloads []v1alpha1.ResourceSelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case !jsonPointer.MatchString(o.Path):
		errs = append(errs, field.Invalid(p.Child("path"), o.Path, MsgJSONPointer))
	case sets.New(reservedPaths...).Has(o.Path) || o.Path == "/status" || strings.HasPrefix(o.Path, "/status/"):
		errs = append(errs, field.Forbidden(p.Child("path"), "flotilla keeps this field: it identifies the object or belongs to the member cluster"))
	case flotillaKeyPath(o.Path):
		errs = append(errs, field.Forbidden(p.Child("path"), "keys under "+wellknown.Prefix+" are flotilla's own"))
	default:
		errs = append(errs, reachesPods(workloads, o.Path, p.Child("path"))...)
	}
	hasValue := o.Value != nil && len(o.Value.Raw) > 0
	switch o.Operator {
	case v1alpha1.OverriderOpAdd, v1alpha1.OverriderOpReplace:
		if !hasValue {
			errs = append(errs, field.Required(p.Child("value"), MsgValueRequired))
		} else if !json.Valid(o.Value.Raw) {
			errs = append(errs, field.Invalid(p.Child("value"), string(o.Value.Raw), "must be JSON"))
		}
	case v1alpha1.OverriderOpRemove:
		if hasValue {
			errs = append(errs, field.Forbidden(p.Child("value"), MsgValueForbidden))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), o.Operator, allOperators))
	}
	return errs
}

// flotillaKeyPath reports whether a path leads to a label or annotation
// under flotilla.io/.
func flotillaKeyPath(path string) bool {
	segs := strings.Split(path, "/")
	for i := 1; i+1 < len(segs); i++ {
		if (segs[i] == "labels" || segs[i] == "annotations") && strings.HasPrefix(unescape(segs[i+1]), wellknown.Prefix) {
			return true
		}
	}
	return false
}

func unescape(seg string) string {
	return strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
}

// Parts of an image reference, as the image overrider changes them: a
// registry is a host with an optional port; a repository is slash-separated
// lowercase path components; a tag is a docker tag; a digest is
// algorithm:hex.
var (
	registryRe     = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]+)?$`)
	registryPartRe = regexp.MustCompile(`^[a-zA-Z0-9.:-]+$`)
	repositoryRe   = regexp.MustCompile(`^[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$`)
	repoPartRe     = regexp.MustCompile(`^[a-z0-9._/-]+$`)
	tagRe          = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
	tagPartRe      = regexp.MustCompile(`^[\w.-]{1,127}$`)
	digestRe       = regexp.MustCompile(`^[a-z0-9]+([+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$`)
)

func validateImageOverrider(o *v1alpha1.ImageOverrider, workloads []v1alpha1.ResourceSelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if o.Predicate != nil {
		if !jsonPointer.MatchString(o.Predicate.Path) {
			errs = append(errs, field.Invalid(p.Child("predicate", "path"), o.Predicate.Path, MsgJSONPointer))
		} else {
			errs = append(errs, reachesPods(workloads, o.Predicate.Path, p.Child("predicate", "path"))...)
		}
	}
	switch o.Component {
	case v1alpha1.Registry, v1alpha1.Repository, v1alpha1.Tag:
	default:
		errs = append(errs, field.NotSupported(p.Child("component"), o.Component, []v1alpha1.ImageComponent{v1alpha1.Registry, v1alpha1.Repository, v1alpha1.Tag}))
		return errs
	}
	vp := p.Child("value")
	switch o.Operator {
	case v1alpha1.OverriderOpRemove:
		if o.Value != "" {
			errs = append(errs, field.Forbidden(vp, MsgValueForbidden))
		}
		if o.Component == v1alpha1.Repository {
			errs = append(errs, field.Forbidden(p.Child("operator"), MsgKeepRepository))
		}
		return errs
	case v1alpha1.OverriderOpAdd, v1alpha1.OverriderOpReplace:
		if o.Value == "" {
			return append(errs, field.Required(vp, MsgValueRequired))
		}
	default:
		return append(errs, field.NotSupported(p.Child("operator"), o.Operator, allOperators))
	}
	add := o.Operator == v1alpha1.OverriderOpAdd
	switch {
	case o.Component == v1alpha1.Registry && add && !registryPartRe.MatchString(o.Value),
		o.Component == v1alpha1.Registry && !add && !registryRe.MatchString(o.Value):
		errs = append(errs, field.Invalid(vp, o.Value, "not (part of) an image registry such as registry.example:5000"))
	case o.Component == v1alpha1.Repository && add && !repoPartRe.MatchString(o.Value),
		o.Component == v1alpha1.Repository && !add && !repositoryRe.MatchString(o.Value):
		errs = append(errs, field.Invalid(vp, o.Value, "not (part of) an image repository such as library/nginx"))
	case o.Component == v1alpha1.Tag && add && !tagPartRe.MatchString(o.Value),
		o.Component == v1alpha1.Tag && !add && !tagRe.MatchString(o.Value) && !digestRe.MatchString(o.Value):
		errs = append(errs, field.Invalid(vp, o.Value, "not (part of) an image tag such as 1.27, or a digest such as sha256:<64 hex digits>"))
	}
	return errs
}

func validateCommandArgs(o *v1alpha1.CommandArgsOverrider, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if o.ContainerName == "" {
		errs = append(errs, field.Required(p.Child("containerName"), ""))
	}
	switch o.Operator {
	case v1alpha1.OverriderOpAdd, v1alpha1.OverriderOpRemove:
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), o.Operator, []v1alpha1.OverriderOperator{v1alpha1.OverriderOpAdd, v1alpha1.OverriderOpRemove}))
	}
	return errs
}

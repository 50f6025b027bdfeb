// Package validation checks a defaulted NodeConfig beyond what its types can
// say: virtual cluster names that are node names, partitions that cannot
// overlap in namespaces, kubelet ports that are ports and distinct, label
// selectors and taints the host will accept. It is pure, like the policy
// API's validation: flotilla-node calls it at start-up, and so can anything
// that renders a NodeConfig (the chart's tests, the benchmarks). Errors carry
// the path of the offending field, e.g. virtualClusters[1].nodeSelector.
package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/internal/wellknown"
)

// ValidateNodeConfig checks a NodeConfig after defaulting (every virtual
// cluster has a namespace mapping and a kubelet port).
func ValidateNodeConfig(cfg *v1alpha1.NodeConfig) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("virtualClusters")
	partitioned := len(cfg.VirtualClusters) > 1
	names := map[string]int{}
	ports := map[int32]int{}
	for i := range cfg.VirtualClusters {
		vc := &cfg.VirtualClusters[i]
		p := path.Index(i)
		for _, msg := range utilvalidation.IsDNS1123Subdomain(vc.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), vc.Name, msg))
		}
		// The name is also the value of the virtual node's and the
		// member pods' cluster label, which holds at most 63 characters.
		for _, msg := range utilvalidation.IsValidLabelValue(vc.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), vc.Name, "the name is the value of the "+wellknown.ClusterLabel+" label: "+msg))
		}
		if j, dup := names[vc.Name]; dup {
			errs = append(errs, field.Duplicate(p.Child("name"), fmt.Sprintf("%s (also virtualClusters[%d])", vc.Name, j)))
		}
		names[vc.Name] = i
		if partitioned && EmptySelector(vc.NodeSelector) {
			errs = append(errs, field.Required(p.Child("nodeSelector"), "every virtual cluster needs a node selector when there is more than one"))
		}
		if vc.NodeSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(vc.NodeSelector); err != nil {
				errs = append(errs, field.Invalid(p.Child("nodeSelector"), vc.NodeSelector, err.Error()))
			}
		}
		switch vc.NamespaceMapping {
		case v1alpha1.SameName, v1alpha1.Suffix:
		default:
			errs = append(errs, field.NotSupported(p.Child("namespaceMapping"), vc.NamespaceMapping, []string{string(v1alpha1.SameName), string(v1alpha1.Suffix)}))
		}
		if partitioned && vc.NamespaceMapping == v1alpha1.SameName {
			errs = append(errs, field.Invalid(p.Child("namespaceMapping"), vc.NamespaceMapping, "partitions of one member must not share namespaces; use Suffix"))
		}
		if vc.KubeletPort <= 0 || vc.KubeletPort > 65535 {
			errs = append(errs, field.Invalid(p.Child("kubeletPort"), vc.KubeletPort, "must be a TCP port"))
		} else if j, dup := ports[vc.KubeletPort]; dup {
			errs = append(errs, field.Duplicate(p.Child("kubeletPort"), fmt.Sprintf("%d (also virtualClusters[%d])", vc.KubeletPort, j)))
		}
		ports[vc.KubeletPort] = i
		errs = append(errs, validateLabels(vc.Labels, p.Child("labels"))...)
		errs = append(errs, validateTaints(vc.Taints, p.Child("taints"))...)
		errs = append(errs, validatePlacement(vc.Placement, p.Child("placement"))...)
		errs = append(errs, validateStorageClasses(vc.StorageClasses, p.Child("storageClasses"))...)
	}
	errs = append(errs, validateStorageClasses(cfg.StorageClasses, field.NewPath("storageClasses"))...)
	return append(errs, validatePlacement(cfg.Placement, field.NewPath("placement"))...)
}

// validateStorageClasses checks that both sides of a mapping are names a
// storage class can have.
func validateStorageClasses(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for host, member := range m {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(host) {
			errs = append(errs, field.Invalid(p.Key(host), host, "host storage class: "+msg))
		}
		for _, msg := range utilvalidation.IsDNS1123Subdomain(member) {
			errs = append(errs, field.Invalid(p.Key(host), member, "member storage class: "+msg))
		}
	}
	return errs
}

// validatePlacement checks one placement block; nil is valid.
func validatePlacement(pl *v1alpha1.Placement, p *field.Path) field.ErrorList {
	if pl == nil {
		return nil
	}
	var errs field.ErrorList
	for name, d := range map[string]*metav1.Duration{"handBackAfter": pl.HandBackAfter, "nodeProvisionTimeout": pl.NodeProvisionTimeout} {
		if d != nil && d.Duration <= 0 {
			errs = append(errs, field.Invalid(p.Child(name), d.Duration.String(), "must be positive"))
		}
	}
	for i, shape := range pl.NodeShapes {
		sp := p.Child("nodeShapes").Index(i)
		if len(shape.Allocatable) == 0 {
			errs = append(errs, field.Required(sp.Child("allocatable"), "a node shape says what the node offers"))
		}
		for name, q := range shape.Allocatable {
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(sp.Child("allocatable").Key(string(name)), q.String(), "must not be negative"))
			}
		}
		errs = append(errs, validateLabels(shape.Labels, sp.Child("labels"))...)
		errs = append(errs, validateTaints(shape.Taints, sp.Child("taints"))...)
	}
	return errs
}

// EmptySelector reports whether s selects every node.
func EmptySelector(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}

func validateLabels(l map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k, v := range l {
		for _, msg := range utilvalidation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		for _, msg := range utilvalidation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Key(k), v, msg))
		}
	}
	return errs
}

// validateTaints rejects what the host apiserver would refuse when the
// virtual node is registered, so that the mistake shows at start-up with the
// file's field path rather than as a failed node create.
func validateTaints(taints []corev1.Taint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for i, t := range taints {
		tp := p.Index(i)
		for _, msg := range utilvalidation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
		}
		for _, msg := range utilvalidation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(tp.Child("value"), t.Value, msg))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, []string{
				string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
		}
		key := t.Key + ":" + string(t.Effect)
		if j, dup := seen[key]; dup {
			errs = append(errs, field.Duplicate(tp, fmt.Sprintf("%s (also taints[%d])", key, j)))
		}
		seen[key] = i
	}
	return errs
}

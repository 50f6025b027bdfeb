package propagation

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/wellknown"
)

// fieldLabels are the virtual-node labels that carry the cluster fields a
// FieldSelector and a SpreadConstraint name.
var fieldLabels = map[string]string{
	string(v1alpha1.ProviderField): wellknown.ProviderLabel,
	string(v1alpha1.RegionField):   corev1.LabelTopologyRegion,
	string(v1alpha1.ZoneField):     corev1.LabelTopologyZone,
}

// field returns a cluster's provider, region or zone, "" when it has none.
func (c *Cluster) field(name string) string {
	return c.Labels[fieldLabels[name]]
}

// affinityMatches reports whether a cluster matches an affinity: it is not
// excluded, and each of labelSelector, fieldSelector and clusterNames that
// is set matches it. A nil affinity matches every cluster. The error is the
// affinity's own: an invalid label selector matches nothing.
func affinityMatches(a *v1alpha1.ClusterAffinity, c *Cluster) (bool, error) {
	if a == nil {
		return true, nil
	}
	if slices.Contains(a.ExcludeClusters, c.Name) {
		return false, nil
	}
	if a.LabelSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(a.LabelSelector)
		if err != nil {
			return false, fmt.Errorf("invalid labelSelector: %w", err)
		}
		if !s.Matches(labels.Set(c.Labels)) {
			return false, nil
		}
	}
	if a.FieldSelector != nil {
		for _, r := range a.FieldSelector.MatchExpressions {
			ok, err := fieldMatches(r, c)
			if err != nil {
				return false, err
			}
			if !ok {
				return false, nil
			}
		}
	}
	return len(a.ClusterNames) == 0 || slices.Contains(a.ClusterNames, c.Name), nil
}

// fieldMatches evaluates one field requirement as a label selector would
// over the cluster's fields, as Karmada does: In needs the field and one of
// the values, NotIn holds for a cluster without the field.
func fieldMatches(r v1alpha1.FieldSelectorRequirement, c *Cluster) (bool, error) {
	if _, ok := fieldLabels[string(r.Key)]; !ok {
		return false, fmt.Errorf("fieldSelector: unknown key %q: must be provider, region or zone", r.Key)
	}
	v := c.field(string(r.Key))
	switch r.Operator {
	case v1alpha1.FieldSelectorOpIn:
		return v != "" && slices.Contains(r.Values, v), nil
	case v1alpha1.FieldSelectorOpNotIn:
		return v == "" || !slices.Contains(r.Values, v), nil
	}
	return false, fmt.Errorf("fieldSelector: unknown operator %q for %s: must be In or NotIn", r.Operator, r.Key)
}

// untolerated returns the first NoSchedule or NoExecute taint of the cluster
// that the tolerations do not tolerate. PreferNoSchedule taints never keep a
// cluster out, as in Karmada and the kube-scheduler's filter.
func untolerated(c *Cluster, tolerations []corev1.Toleration) (corev1.Taint, bool) {
	for _, t := range c.Taints {
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if t.Key == wellknown.ProviderTaintKey && t.Value == wellknown.ProviderTaintValue {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(tol corev1.Toleration) bool { return tolerates(tol, t) }) {
			return t, true
		}
	}
	return corev1.Taint{}, false
}

// tolerates is corev1.Toleration.ToleratesTaint without the alpha Gt/Lt
// operators, whose logger argument would make logr a direct dependency for
// nothing: an empty key with Exists tolerates every key, an empty effect
// every effect.
func tolerates(tol corev1.Toleration, t corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case "", corev1.TolerationOpEqual:
		return tol.Value == t.Value
	case corev1.TolerationOpExists:
		return true
	}
	return false
}

// MayUse reports whether placement p could choose cluster c at all,
// whatever c's readiness, taints or free capacity: c matches p's
// clusterAffinity, or one of its clusterAffinities. A cluster p may not use
// changes p's decision only by a change of its name or labels. An invalid
// affinity counts as a match, so that the caller stays on the safe side.
func MayUse(p *v1alpha1.Placement, c *Cluster) bool {
	if p == nil {
		return true
	}
	if len(p.ClusterAffinities) == 0 {
		ok, err := affinityMatches(p.ClusterAffinity, c)
		return ok || err != nil
	}
	for i := range p.ClusterAffinities {
		if ok, err := affinityMatches(&p.ClusterAffinities[i].ClusterAffinity, c); ok || err != nil {
			return true
		}
	}
	return false
}

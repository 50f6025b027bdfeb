package override

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/wellknown"
)

// Cluster is a target cluster as policies see it: a virtual node's name and
// labels, and the provider, region and zone a field selector matches.
type Cluster struct {
	Name     string
	Labels   map[string]string
	Provider string
	Region   string
	Zone     string
}

// ClusterFromNode describes the cluster a virtual node stands for: the
// node's name and labels, its provider from flotilla.io/provider and its
// region and zone from the topology.kubernetes.io labels.
func ClusterFromNode(n *corev1.Node) Cluster {
	return Cluster{
		Name:     n.Name,
		Labels:   n.Labels,
		Provider: n.Labels[wellknown.ProviderLabel],
		Region:   n.Labels[corev1.LabelTopologyRegion],
		Zone:     n.Labels[corev1.LabelTopologyZone],
	}
}

// field returns the value a field selector compares; empty when the
// cluster does not have the field.
func (c Cluster) field(f v1alpha1.ClusterField) (string, bool) {
	var v string
	switch f {
	case v1alpha1.ProviderField:
		v = c.Provider
	case v1alpha1.RegionField:
		v = c.Region
	case v1alpha1.ZoneField:
		v = c.Zone
	}
	return v, v != ""
}

// ClusterMatches reports whether a cluster satisfies an affinity: it is not
// excluded, and it matches every part that is set (labelSelector,
// fieldSelector, clusterNames). A nil affinity matches every cluster. An
// affinity that validation would reject (a bad selector, an unknown field or
// operator) matches none.
func ClusterMatches(c Cluster, a *v1alpha1.ClusterAffinity) bool {
	if a == nil {
		return true
	}
	for _, n := range a.ExcludeClusters {
		if n == c.Name {
			return false
		}
	}
	if a.LabelSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(a.LabelSelector)
		if err != nil || !s.Matches(labels.Set(c.Labels)) {
			return false
		}
	}
	if a.FieldSelector != nil {
		for _, req := range a.FieldSelector.MatchExpressions {
			if !fieldMatches(c, req) {
				return false
			}
		}
	}
	if len(a.ClusterNames) == 0 {
		return true
	}
	for _, n := range a.ClusterNames {
		if n == c.Name {
			return true
		}
	}
	return false
}

// fieldMatches follows label selector semantics, as Karmada does: In needs
// the field and one of the values; NotIn holds when the field is missing.
func fieldMatches(c Cluster, req v1alpha1.FieldSelectorRequirement) bool {
	switch req.Key {
	case v1alpha1.ProviderField, v1alpha1.RegionField, v1alpha1.ZoneField:
	default:
		return false
	}
	v, ok := c.field(req.Key)
	in := false
	for _, want := range req.Values {
		if ok && v == want {
			in = true
		}
	}
	switch req.Operator {
	case v1alpha1.FieldSelectorOpIn:
		return in
	case v1alpha1.FieldSelectorOpNotIn:
		return !in
	}
	return false
}

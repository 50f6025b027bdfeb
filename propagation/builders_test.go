package propagation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/wellknown"
)

const (
	divided    = v1alpha1.ReplicaSchedulingTypeDivided
	duplicated = v1alpha1.ReplicaSchedulingTypeDuplicated
	weighted   = v1alpha1.ReplicaDivisionPreferenceWeighted
	aggregated = v1alpha1.ReplicaDivisionPreferenceAggregated
)

// clusterWrapper builds test clusters: Ready, holding 1 CPU and 110 pods
// unless told otherwise.
type clusterWrapper struct{ Cluster }

func makeCluster(name string) *clusterWrapper {
	return &clusterWrapper{Cluster{
		Name:   name,
		Labels: map[string]string{wellknown.ClusterLabel: name},
		Ready:  true,
		Available: corev1.ResourceList{
			corev1.ResourceCPU:  resource.MustParse("1"),
			corev1.ResourcePods: resource.MustParse("110"),
		},
	}}
}

func (c *clusterWrapper) region(r string) *clusterWrapper {
	c.Labels[corev1.LabelTopologyRegion] = r
	return c
}

func (c *clusterWrapper) zone(z string) *clusterWrapper {
	c.Labels[corev1.LabelTopologyZone] = z
	return c
}

func (c *clusterWrapper) provider(p string) *clusterWrapper {
	c.Labels[wellknown.ProviderLabel] = p
	return c
}

func (c *clusterWrapper) label(k, v string) *clusterWrapper {
	c.Labels[k] = v
	return c
}

func (c *clusterWrapper) taint(key, value string, effect corev1.TaintEffect) *clusterWrapper {
	c.Taints = append(c.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return c
}

func (c *clusterWrapper) notReady() *clusterWrapper {
	c.Ready = false
	return c
}

// cpu sets the available CPU; with the 100m replicas of workload(), 1 CPU
// holds 10 replicas.
func (c *clusterWrapper) cpu(q string) *clusterWrapper {
	c.Available[corev1.ResourceCPU] = resource.MustParse(q)
	return c
}

func (c *clusterWrapper) obj() Cluster { return c.Cluster }

// workload is n replicas of 100m CPU each.
func workload(n int32) Workload {
	return Workload{Replicas: n, Request: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
}

// placementWrapper builds placements.
type placementWrapper struct{ v1alpha1.Placement }

func makePlacement() *placementWrapper { return &placementWrapper{} }

func (p *placementWrapper) affinity(a v1alpha1.ClusterAffinity) *placementWrapper {
	p.ClusterAffinity = &a
	return p
}

func (p *placementWrapper) affinities(terms ...v1alpha1.ClusterAffinityTerm) *placementWrapper {
	p.ClusterAffinities = terms
	return p
}

func (p *placementWrapper) tolerate(key, value string, effect corev1.TaintEffect) *placementWrapper {
	op := corev1.TolerationOpEqual
	if value == "" {
		op = corev1.TolerationOpExists
	}
	p.ClusterTolerations = append(p.ClusterTolerations, corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	return p
}

func (p *placementWrapper) spread(field v1alpha1.SpreadFieldValue, minGroups, maxGroups int32) *placementWrapper {
	p.SpreadConstraints = append(p.SpreadConstraints, v1alpha1.SpreadConstraint{SpreadByField: field, MinGroups: minGroups, MaxGroups: maxGroups})
	return p
}

func (p *placementWrapper) spreadByLabel(label string, minGroups, maxGroups int32) *placementWrapper {
	p.SpreadConstraints = append(p.SpreadConstraints, v1alpha1.SpreadConstraint{SpreadByLabel: label, MinGroups: minGroups, MaxGroups: maxGroups})
	return p
}

func (p *placementWrapper) duplicated() *placementWrapper {
	p.ReplicaScheduling = &v1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDuplicated}
	return p
}

func (p *placementWrapper) divided(pref v1alpha1.ReplicaDivisionPreference) *placementWrapper {
	p.ReplicaScheduling = &v1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: pref}
	return p
}

// static divides Weighted by name=weight pairs.
func (p *placementWrapper) static(weights ...v1alpha1.StaticClusterWeight) *placementWrapper {
	p.divided(v1alpha1.ReplicaDivisionPreferenceWeighted)
	p.ReplicaScheduling.WeightPreference = &v1alpha1.ClusterPreferences{StaticWeightList: weights}
	return p
}

func (p *placementWrapper) dynamic() *placementWrapper {
	p.divided(v1alpha1.ReplicaDivisionPreferenceWeighted)
	p.ReplicaScheduling.WeightPreference = &v1alpha1.ClusterPreferences{DynamicWeight: v1alpha1.DynamicWeightByAvailableReplicas}
	return p
}

func (p *placementWrapper) obj() *v1alpha1.Placement { return &p.Placement }

func weight(w int64, names ...string) v1alpha1.StaticClusterWeight {
	return v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: names}, Weight: w}
}

func names(ns ...string) v1alpha1.ClusterAffinity {
	return v1alpha1.ClusterAffinity{ClusterNames: ns}
}

func term(name string, a v1alpha1.ClusterAffinity) v1alpha1.ClusterAffinityTerm {
	return v1alpha1.ClusterAffinityTerm{AffinityName: name, ClusterAffinity: a}
}

func labelSelector(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func fieldIn(key v1alpha1.ClusterField, op v1alpha1.FieldSelectorOperator, values ...string) *v1alpha1.FieldSelector {
	return &v1alpha1.FieldSelector{MatchExpressions: []v1alpha1.FieldSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// targets builds Targets from name, replicas, weight triples.
func tgt(name string, replicas int32, weight int64) Target {
	return Target{Cluster: name, Replicas: replicas, Weight: weight}
}

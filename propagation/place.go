package propagation

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

// Place decides where a workload runs under one placement. It returns an
// *Unschedulable, and no decision, when the workload cannot be placed; it
// returns no other error.
func Place(p *v1alpha1.Placement, clusters []Cluster, w Workload) (Decision, error) {
	if p == nil {
		p = &v1alpha1.Placement{}
	}
	sorted := make([]*Cluster, len(clusters))
	for i := range clusters {
		sorted[i] = &clusters[i]
	}
	slices.SortFunc(sorted, func(a, b *Cluster) int { return cmp.Compare(a.Name, b.Name) })
	n := max(w.Replicas, 0)
	s, reason := strategyOf(p.ReplicaScheduling)
	if reason != "" {
		return Decision{}, &Unschedulable{Reasons: []string{reason}}
	}

	if len(p.ClusterAffinities) == 0 {
		d, reason := placeTerm(p, s, p.ClusterAffinity, sorted, w.Request, n)
		if reason != "" {
			if reason == noMatch {
				reason = noMatch + " clusterAffinity"
			}
			return Decision{}, &Unschedulable{Reasons: []string{reason}}
		}
		return d, nil
	}
	var reasons []string
	for i := range p.ClusterAffinities {
		term := &p.ClusterAffinities[i]
		d, reason := placeTerm(p, s, &term.ClusterAffinity, sorted, w.Request, n)
		if reason == "" {
			d.AffinityName = term.AffinityName
			return d, nil
		}
		reasons = append(reasons, fmt.Sprintf("clusterAffinities[%d] %q: %s", i, term.AffinityName, reason))
	}
	return Decision{}, &Unschedulable{Reasons: reasons}
}

const noMatch = "no cluster matches"

// strategy is how a placement shares replicas.
type strategy struct {
	mode     v1alpha1.ReplicaSchedulingType
	division v1alpha1.ReplicaDivisionPreference
	static   []v1alpha1.StaticClusterWeight // Weighted by these
	dynamic  bool                           // Weighted by capacity
}

// strategyOf applies Karmada's defaults: no replicaScheduling is
// Duplicated, an empty type Divided, an empty division Weighted, and
// Weighted without weightPreference weighs every cluster 1.
func strategyOf(rs *v1alpha1.ReplicaSchedulingStrategy) (strategy, string) {
	if rs == nil || rs.ReplicaSchedulingType == v1alpha1.ReplicaSchedulingTypeDuplicated {
		return strategy{mode: v1alpha1.ReplicaSchedulingTypeDuplicated}, ""
	}
	if rs.ReplicaSchedulingType != "" && rs.ReplicaSchedulingType != v1alpha1.ReplicaSchedulingTypeDivided {
		return strategy{}, fmt.Sprintf("replicaScheduling: unknown replicaSchedulingType %q", rs.ReplicaSchedulingType)
	}
	s := strategy{mode: v1alpha1.ReplicaSchedulingTypeDivided, division: rs.ReplicaDivisionPreference}
	switch s.division {
	case "":
		s.division = v1alpha1.ReplicaDivisionPreferenceWeighted
	case v1alpha1.ReplicaDivisionPreferenceWeighted, v1alpha1.ReplicaDivisionPreferenceAggregated:
	default:
		return strategy{}, fmt.Sprintf("replicaScheduling: unknown replicaDivisionPreference %q", s.division)
	}
	if wp := rs.WeightPreference; s.division == v1alpha1.ReplicaDivisionPreferenceWeighted && wp != nil {
		switch wp.DynamicWeight {
		case "":
			s.static = wp.StaticWeightList
		case v1alpha1.DynamicWeightByAvailableReplicas:
			s.dynamic = true
		default:
			return strategy{}, fmt.Sprintf("replicaScheduling: unknown dynamicWeight %q", wp.DynamicWeight)
		}
	}
	return s, ""
}

// byCapacity reports whether replicas follow capacity: dynamic weights and
// Aggregated.
func (s strategy) byCapacity() bool {
	return s.dynamic || s.division == v1alpha1.ReplicaDivisionPreferenceAggregated
}

// placeTerm places n replicas on the clusters one affinity selects, or
// says why it cannot.
func placeTerm(p *v1alpha1.Placement, s strategy, a *v1alpha1.ClusterAffinity, clusters []*Cluster, req corev1.ResourceList, n int32) (Decision, string) {
	// Affinity, readiness, taints.
	var cands []candidate
	var excluded []string // why a cluster the affinity selects was left out
	matched := 0
	for _, c := range clusters {
		ok, err := affinityMatches(a, c)
		if err != nil {
			return Decision{}, "clusterAffinity: " + err.Error()
		}
		if !ok {
			continue
		}
		matched++
		if !c.Ready {
			excluded = append(excluded, fmt.Sprintf("cluster %s: not ready", c.Name))
			continue
		}
		if t, ok := untolerated(c, p.ClusterTolerations); ok {
			excluded = append(excluded, fmt.Sprintf("cluster %s: untolerated taint %s", c.Name, t.ToString()))
			continue
		}
		cap := capacity(c.Available, req)
		if c.Holds != nil {
			cap = min(cap, *c.Holds)
		}
		cands = append(cands, candidate{Cluster: c, cap: cap})
	}
	if matched == 0 {
		if len(clusters) == 0 {
			return Decision{}, "there are no clusters"
		}
		return Decision{}, noMatch
	}
	fail := func(reason string) (Decision, string) {
		return Decision{}, strings.Join(append([]string{reason}, excluded...), "; ")
	}
	if len(cands) == 0 {
		return Decision{}, strings.Join(excluded, "; ")
	}

	// Weights. Static ones: the largest weight of the items that match a
	// cluster; a cluster no item matches gets nothing, unless none matches
	// any, when all weigh the same (Karmada's rule).
	switch {
	case s.mode == v1alpha1.ReplicaSchedulingTypeDuplicated:
		for i := range cands {
			cands[i].weight = 1
		}
	case s.byCapacity():
		for i := range cands {
			cands[i].weight = cands[i].cap
		}
	case len(s.static) > 0:
		matchedAny := false
		for i := range cands {
			for j, sw := range s.static {
				ok, err := affinityMatches(&sw.TargetCluster, cands[i].Cluster)
				if err != nil {
					return Decision{}, fmt.Sprintf("replicaScheduling.weightPreference.staticWeightList[%d].targetCluster: %v", j, err)
				}
				if ok && sw.Weight > cands[i].weight {
					cands[i].weight = sw.Weight
					matchedAny = true
				}
			}
		}
		if matchedAny {
			cands = slices.DeleteFunc(cands, func(c candidate) bool { return c.weight <= 0 })
		} else {
			for i := range cands {
				cands[i].weight = 1
			}
		}
	default:
		for i := range cands {
			cands[i].weight = 1
		}
	}

	cands, reason := spread(cands, p.SpreadConstraints)
	if reason != "" {
		return fail(reason)
	}

	// Fit: Duplicated needs every cluster to hold all replicas, Divided
	// needs them all together to.
	if s.mode == v1alpha1.ReplicaSchedulingTypeDuplicated {
		var short []string
		for _, c := range cands {
			if c.cap < int64(n) {
				short = append(short, fmt.Sprintf("cluster %s can hold %d of %d replicas", c.Name, c.cap, n))
			}
		}
		if len(short) > 0 {
			return fail(strings.Join(short, "; "))
		}
	} else {
		var total int64
		var each []string
		for _, c := range cands {
			total = addSat(total, c.cap)
			each = append(each, fmt.Sprintf("%s: %d", c.Name, c.cap))
		}
		if total < int64(n) {
			return fail(fmt.Sprintf("clusters can hold %d of %d replicas (%s)", total, n, strings.Join(each, ", ")))
		}
		if s.byCapacity() && n > 0 {
			cands = slices.DeleteFunc(cands, func(c candidate) bool { return c.cap == 0 })
		}
	}

	d := Decision{Mode: s.mode, Division: s.division}
	for _, c := range cands {
		d.Targets = append(d.Targets, Target{Cluster: c.Name, Weight: c.weight})
	}
	if s.mode == v1alpha1.ReplicaSchedulingTypeDuplicated {
		for i := range d.Targets {
			d.Targets[i].Replicas = n
		}
	} else {
		divide(d, n)
	}
	return d, ""
}

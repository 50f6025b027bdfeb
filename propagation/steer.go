package propagation

import (
	"cmp"
	"math"
	"slices"
)

// Next returns the cluster that should run the next new replica of a
// Divided (or Duplicated) decision, given how many replicas each cluster
// runs now: the target furthest below its replicas (the largest
// Replicas-count), ties to the larger Replicas, then the name. When no
// target is below its replicas it still returns one, so that a controller
// that asked for a replica gets it: the target whose next replica comes
// first in the decision's order (the largest Weight/(2*count+1) under
// Weighted, the first cluster of the packing order still under its capacity
// under Aggregated). It returns "" only when the decision has no targets.
// Counts of clusters that are not targets are ignored.
func Next(d Decision, counts map[string]int32) string {
	best := -1
	var bestGap int32
	for i, t := range d.Targets {
		gap := t.Replicas - max(counts[t.Cluster], 0)
		if gap <= 0 {
			continue
		}
		if best < 0 || cmp.Or(cmp.Compare(gap, bestGap), cmp.Compare(t.Replicas, d.Targets[best].Replicas),
			cmp.Compare(d.Targets[best].Cluster, t.Cluster)) > 0 {
			best, bestGap = i, gap
		}
	}
	if best >= 0 {
		return d.Targets[best].Cluster
	}
	var bestPos int64
	for i, t := range d.Targets {
		p := position(d, i, int64(max(counts[t.Cluster], 0))+1)
		if best < 0 || p < bestPos || p == bestPos && t.Cluster < d.Targets[best].Cluster {
			best, bestPos = i, p
		}
	}
	if best < 0 {
		return ""
	}
	return d.Targets[best].Cluster
}

// DeletionCost returns the controller.kubernetes.io/pod-deletion-cost of
// the rank-th replica in cluster c, rank 1 being the cluster's oldest
// replica of the workload (by creation time, then name): minus the
// replica's position in the decision's order, or math.MinInt32 in a
// cluster that is not a target.
//
// The invariant: when the running replicas are the order's first n
// positions (every cluster at its target for n, which Next leads to),
// deleting n-m of them lowest cost first leaves exactly the first m: the
// division Place makes for m replicas with the same weights. With weights
// 2:1, 12 replicas 8/4 scaled to 3 leave 2/1. It holds because costs are
// distinct and fall as positions grow, and since positions grow with rank
// within a cluster, each cluster loses its newest replicas and the
// survivors keep their ranks. From any other distribution, the replicas
// furthest along the order, those beyond their cluster's share first, go
// first.
//
// A ReplicaSet looks at costs only after it has deleted unscheduled,
// pending and not-ready pods. Costs are below zero and saturate at
// -math.MaxInt32. A replica's cost changes when an older replica of its
// cluster goes or when the weights change: keep the annotation current.
func DeletionCost(d Decision, c string, rank int32) int32 {
	i := slices.IndexFunc(d.Targets, func(t Target) bool { return t.Cluster == c })
	if i < 0 {
		return math.MinInt32
	}
	p := position(d, i, int64(max(rank, 1)))
	return int32(-min(p, math.MaxInt32))
}

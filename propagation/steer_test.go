package propagation

import (
	"cmp"
	"math"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// The promise of DeletionCost: when each cluster runs its targets for n
// replicas, a ReplicaSet that deletes the lowest costs first leaves the
// targets for any smaller m, in one step.
func TestDeletionCostScalesDownToTheSplit(t *testing.T) {
	for name, d := range decisions() {
		t.Run(name, func(t *testing.T) {
			for n := int32(0); n <= 30; n++ {
				pods := podsOf(split(d, n))
				for m := int32(0); m <= n; m++ {
					if diff := gocmp.Diff(split(d, m), scaleDown(d, pods, m)); diff != "" {
						t.Fatalf("%d replicas scaled to %d (-want +got):\n%s", n, m, diff)
					}
				}
			}
		})
	}
}

// The example in DeletionCost's documentation.
func TestDeletionCostTwoToOne(t *testing.T) {
	d := Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 8, 2), tgt("b", 4, 1)}}
	pods := podsOf(map[string]int32{"a": 8, "b": 4})
	for m, want := range map[int32]map[string]int32{
		11: {"a": 7, "b": 4},
		9:  {"a": 6, "b": 3},
		6:  {"a": 4, "b": 2},
		3:  {"a": 2, "b": 1},
		1:  {"a": 1},
	} {
		if diff := gocmp.Diff(want, scaleDown(d, pods, m)); diff != "" {
			t.Errorf("12 replicas 8/4 scaled to %d (-want +got):\n%s", m, diff)
		}
	}
}

// Replicas beyond a cluster's target, or in a cluster that is not a target,
// go before the others.
func TestDeletionCostRemovesSurplusFirst(t *testing.T) {
	d := Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 2, 1), tgt("b", 2, 1)}}
	cases := map[string]struct {
		pods map[string]int32
		to   int32
		want map[string]int32
	}{
		"a cluster that is not a target empties first": {
			pods: map[string]int32{"a": 2, "b": 1, "gone": 2}, to: 3, want: map[string]int32{"a": 2, "b": 1},
		},
		"the cluster beyond its share shrinks first": {
			pods: map[string]int32{"a": 4, "b": 1}, to: 3, want: map[string]int32{"a": 2, "b": 1},
		},
		"then both follow the weights": {
			pods: map[string]int32{"a": 4, "b": 1}, to: 2, want: map[string]int32{"a": 1, "b": 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := gocmp.Diff(tc.want, scaleDown(d, podsOf(tc.pods), tc.to)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeletionCostBounds(t *testing.T) {
	d := Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 1, 1), tgt("z", 0, 0)}}
	cases := map[string]struct {
		cluster string
		rank    int32
		want    int32
	}{
		"the first replica":           {"a", 1, -1},
		"rank 0 counts as the first":  {"a", 0, -1},
		"a huge rank saturates":       {"a", math.MaxInt32, -math.MaxInt32},
		"a weight of 0 saturates":     {"z", 1, -math.MaxInt32},
		"a cluster that is no target": {"x", 1, math.MinInt32},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := DeletionCost(d, tc.cluster, tc.rank); got != tc.want {
				t.Errorf("DeletionCost(%s, %d) = %d, want %d", tc.cluster, tc.rank, got, tc.want)
			}
		})
	}
}

type pod struct {
	cluster string
	rank    int32
}

func podsOf(counts map[string]int32) []pod {
	var pods []pod
	for c, n := range counts {
		for r := int32(1); r <= n; r++ {
			pods = append(pods, pod{c, r})
		}
	}
	return pods
}

// scaleDown deletes pods lowest deletion cost first, as a ReplicaSet does
// among running, ready pods, until m remain, and counts the rest.
func scaleDown(d Decision, pods []pod, m int32) map[string]int32 {
	type costed struct {
		pod
		cost int32
	}
	cs := make([]costed, len(pods))
	for i, p := range pods {
		cs[i] = costed{p, DeletionCost(d, p.cluster, p.rank)}
	}
	slices.SortFunc(cs, func(x, y costed) int { return cmp.Compare(x.cost, y.cost) })
	left := map[string]int32{}
	for _, p := range cs[len(cs)-int(m):] {
		left[p.cluster]++
	}
	return left
}

func TestNext(t *testing.T) {
	w21 := Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 6, 2), tgt("b", 3, 1)}}
	cases := map[string]struct {
		decision Decision
		counts   map[string]int32
		want     string
	}{
		"the cluster furthest below its target": {
			decision: w21, counts: map[string]int32{"a": 5, "b": 1}, want: "b",
		},
		"on a tie, the larger target": {
			decision: w21, counts: map[string]int32{"a": 4, "b": 1}, want: "a",
		},
		"on a tie of targets too, the name": {
			decision: Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 2, 1), tgt("b", 2, 1)}},
			counts:   map[string]int32{}, want: "a",
		},
		"counts of clusters that are not targets are ignored": {
			decision: w21, counts: map[string]int32{"a": 6, "b": 2, "gone": 5}, want: "b",
		},
		"all at their targets: the next in Sainte-Laguë order": {
			// a's 7th replica has priority 2/13, b's 4th 1/7: a.
			decision: w21, counts: map[string]int32{"a": 6, "b": 3}, want: "a",
		},
		"all above their targets: still the next in order": {
			// a's 8th 2/15 < b's 4th 1/7: b.
			decision: w21, counts: map[string]int32{"a": 7, "b": 3}, want: "b",
		},
		"Aggregated at its targets: the first cluster with room in packing order": {
			decision: Decision{Mode: divided, Division: aggregated, Targets: []Target{tgt("a", 0, 4), tgt("b", 10, 10), tgt("c", 0, 2)}},
			counts:   map[string]int32{"b": 10}, want: "a",
		},
		"Aggregated with every cluster full: the largest": {
			decision: Decision{Mode: divided, Division: aggregated, Targets: []Target{tgt("a", 4, 4), tgt("b", 10, 10)}},
			counts:   map[string]int32{"a": 4, "b": 10}, want: "b",
		},
		"Duplicated: the cluster missing the most replicas": {
			decision: Decision{Mode: duplicated, Targets: []Target{tgt("a", 3, 1), tgt("b", 3, 1)}},
			counts:   map[string]int32{"a": 2}, want: "b",
		},
		"no targets": {
			decision: Decision{Mode: divided, Division: weighted}, want: "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Next(tc.decision, tc.counts); got != tc.want {
				t.Errorf("Next() = %q, want %q", got, tc.want)
			}
		})
	}
}

// A controller that creates replicas one by one where Next says reaches the
// targets from any start below them, then keeps following the split for
// larger counts.
func TestNextGrowsIntoTheSplit(t *testing.T) {
	for name, d := range decisions() {
		t.Run(name, func(t *testing.T) {
			const n = 12
			d.Targets = slices.Clone(d.Targets)
			divide(d, n)
			counts := map[string]int32{}
			for i := int32(1); i <= n+10; i++ {
				counts[Next(d, counts)]++
				if i < n {
					continue
				}
				if diff := gocmp.Diff(split(d, i), counts); diff != "" {
					t.Fatalf("after %d replicas (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

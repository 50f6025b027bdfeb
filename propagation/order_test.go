package propagation

import (
	"fmt"
	"math"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// decisions are the weight sets the order properties are checked on.
func decisions() map[string]Decision {
	w := func(ws ...int64) []Target {
		ts := make([]Target, len(ws))
		for i, x := range ws {
			ts[i] = Target{Cluster: string(rune('a' + i)), Weight: x}
		}
		return ts
	}
	return map[string]Decision{
		"weighted 2:1":        {Mode: divided, Division: weighted, Targets: w(2, 1)},
		"weighted 1:1:1":      {Mode: divided, Division: weighted, Targets: w(1, 1, 1)},
		"weighted 1:3":        {Mode: divided, Division: weighted, Targets: w(1, 3)},
		"weighted 5:3:2":      {Mode: divided, Division: weighted, Targets: w(5, 3, 2)},
		"weighted 7:1":        {Mode: divided, Division: weighted, Targets: w(7, 1)},
		"weighted 10:6:3:1":   {Mode: divided, Division: weighted, Targets: w(10, 6, 3, 1)},
		"weighted with a 0":   {Mode: divided, Division: weighted, Targets: w(2, 0, 1)},
		"weighted all 0":      {Mode: divided, Division: weighted, Targets: w(0, 0)},
		"weighted huge":       {Mode: divided, Division: weighted, Targets: w(math.MaxInt64, math.MaxInt64/3, 1)},
		"aggregated 4:10:2":   {Mode: divided, Division: aggregated, Targets: w(4, 10, 2)},
		"aggregated with a 0": {Mode: divided, Division: aggregated, Targets: w(3, 0, 3)},
		"duplicated":          {Mode: duplicated, Targets: w(1, 1, 1)},
	}
}

// split returns the targets of d for n replicas, as Place divides them.
func split(d Decision, n int32) map[string]int32 {
	d.Targets = slices.Clone(d.Targets)
	divide(d, n)
	m := map[string]int32{}
	for _, t := range d.Targets {
		if t.Replicas > 0 {
			m[t.Cluster] = t.Replicas
		}
	}
	return m
}

// The positions of the first replicas are 1, 2, 3...: every count of
// replicas has exactly one split, and each split is the one before it plus
// one replica (the division never takes a replica away when n grows).
func TestOrderIsAPermutation(t *testing.T) {
	for name, d := range decisions() {
		t.Run(name, func(t *testing.T) {
			const n = 60
			seen := map[int64]string{}
			for i, tg := range d.Targets {
				for k := int64(1); k <= n; k++ {
					p := position(d, i, k)
					if p > n {
						break
					}
					if other, dup := seen[p]; dup {
						t.Fatalf("position %d is both %s and %s#%d", p, other, tg.Cluster, k)
					}
					seen[p] = fmt.Sprintf("%s#%d", tg.Cluster, k)
				}
			}
			for p := int64(1); p <= n; p++ {
				if _, ok := seen[p]; !ok {
					t.Fatalf("no replica at position %d", p)
				}
			}
			prev := split(d, 0)
			for m := int32(1); m <= n; m++ {
				cur := split(d, m)
				added := 0
				for c, r := range cur {
					switch {
					case r == prev[c]+1:
						added++
					case r != prev[c]:
						t.Fatalf("from %d to %d replicas, %s goes %d -> %d", m-1, m, c, prev[c], r)
					}
				}
				if added != 1 {
					t.Fatalf("from %d to %d replicas, %d clusters grew: %v -> %v", m-1, m, added, prev, cur)
				}
				prev = cur
			}
		})
	}
}

// Sainte-Laguë as published: 100000, 80000, 30000 and 20000 votes share 8
// seats 3/3/1/1. The quotients are A 100000, B 80000, A 33333, C 30000,
// B 26667, then A and D tie at 20000: D, which has fewer seats, goes first,
// as in Karmada; then A and B 16000.
func TestWeightedFollowsSainteLague(t *testing.T) {
	d := Decision{Mode: divided, Division: weighted, Targets: []Target{
		{Cluster: "a", Weight: 100000}, {Cluster: "b", Weight: 80000}, {Cluster: "c", Weight: 30000}, {Cluster: "d", Weight: 20000},
	}}
	if diff := gocmp.Diff(map[string]int32{"a": 3, "b": 3, "c": 1, "d": 1}, split(d, 8)); diff != "" {
		t.Errorf("split of 8 (-want +got):\n%s", diff)
	}
	var got string
	counts := map[string]int32{}
	for range 8 {
		c := nextInOrder(d, counts)
		got += c
		counts[c]++
	}
	if got != "abacbdab" {
		t.Errorf("seat order = %s, want abacbdab", got)
	}
}

// nextInOrder is the target whose next replica has the smallest position.
func nextInOrder(d Decision, counts map[string]int32) string {
	best, bestPos := "", int64(math.MaxInt64)
	for i, t := range d.Targets {
		if p := position(d, i, int64(counts[t.Cluster])+1); p < bestPos {
			best, bestPos = t.Cluster, p
		}
	}
	return best
}

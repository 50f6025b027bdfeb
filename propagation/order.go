package propagation

import (
	"cmp"
	"math/big"
	"slices"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

// The replica order (see the package documentation). Every replica of a
// target has a position; positions are distinct, grow with the replica's
// rank within its cluster, and leave no gap, so the division for n
// replicas is the first n positions.
//
// Weighted: the rank-th replica of a cluster of weight w has priority
// w/(2*rank-1); the higher priority comes first, then the cluster with
// fewer replicas by then (as in Karmada's Webster division), then the
// name. Aggregated: clusters by Weight (capacity) descending, then name,
// each filled to its capacity before the next; replicas beyond every
// capacity come last, one per cluster in turn in that order.

// unreachable is a position no replica count reaches: a cluster of weight
// 0 under Weighted only gets replicas that no positive weight wants.
const unreachable = int64(1) << 62

// position returns the 1-based position of the rank-th replica of
// d.Targets[i], saturated at unreachable.
func position(d Decision, i int, rank int64) int64 {
	if rank <= 0 {
		return 0
	}
	if d.Division == v1alpha1.ReplicaDivisionPreferenceAggregated {
		return packedPosition(d.Targets, i, rank)
	}
	pos := rank
	for j := range d.Targets {
		if j != i {
			pos = addSat(pos, replicasBefore(d.Targets[j], d.Targets[i], rank))
		}
	}
	return pos
}

// replicasBefore counts the replicas of target o that the rank-th replica
// of target t comes after in the Sainte-Laguë order.
func replicasBefore(o, t Target, rank int64) int64 {
	wo, wt := max(o.Weight, 0), max(t.Weight, 0)
	switch {
	case wo == 0 && wt == 0: // every priority is 0: rank, then name
		if o.Cluster < t.Cluster {
			return rank
		}
		return rank - 1
	case wt == 0:
		return unreachable
	case wo == 0:
		return 0
	}
	// The j-th replica of o comes first when wo/(2j-1) > wt/(2rank-1),
	// that is when (2j-1)*wt < a with a = wo*(2rank-1): for every odd
	// number up to (a-1)/wt.
	a := new(big.Int).Mul(big.NewInt(wo), big.NewInt(2*rank-1))
	w := big.NewInt(wt)
	odd := new(big.Int).Sub(a, big.NewInt(1))
	odd.Quo(odd, w)
	n := odd.Add(odd, big.NewInt(1)).Rsh(odd, 1)
	// Equal priority: (2j-1)*wt == a for one j; o comes first when it has
	// fewer replicas by then (j < rank), or as many and sorts first.
	q, r := new(big.Int).QuoRem(a, w, new(big.Int))
	if r.Sign() == 0 && q.Bit(0) == 1 {
		j := new(big.Int).Rsh(q.Add(q, big.NewInt(1)), 1)
		if c := j.Cmp(big.NewInt(rank)); c < 0 || c == 0 && o.Cluster < t.Cluster {
			n.Add(n, big.NewInt(1))
		}
	}
	if !n.IsInt64() || n.Int64() >= unreachable {
		return unreachable
	}
	return n.Int64()
}

// packedPosition is the Aggregated order.
func packedPosition(ts []Target, i int, rank int64) int64 {
	order := packingOrder(ts)
	idx := slices.Index(order, i)
	var before, total int64
	for k, j := range order {
		w := max(ts[j].Weight, 0)
		if k < idx {
			before = addSat(before, w)
		}
		total = addSat(total, w)
	}
	w := max(ts[i].Weight, 0)
	if rank <= w {
		return addSat(before, rank)
	}
	over := (rank - w - 1) * int64(len(ts)) // rank < 2^31, few targets: no overflow
	return addSat(total, addSat(over, int64(idx)+1))
}

// packingOrder returns the indexes of ts by Weight descending, then name.
func packingOrder(ts []Target) []int {
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(ts[b].Weight, ts[a].Weight); c != 0 {
			return c
		}
		return cmp.Compare(ts[a].Cluster, ts[b].Cluster)
	})
	return order
}

func addSat(a, b int64) int64 {
	if a >= unreachable-b {
		return unreachable
	}
	return a + b
}

// divide sets the targets' replicas to their share of the first n
// positions.
func divide(d Decision, n int32) {
	for i := range d.Targets {
		// The largest k whose position is at most n.
		lo, hi := int64(0), int64(n)
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if position(d, i, mid) <= int64(n) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		d.Targets[i].Replicas = int32(lo)
	}
}

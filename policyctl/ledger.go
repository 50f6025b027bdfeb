package policyctl

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// ledgerTTL is how long an assignment the webhook made waits for its pod to
// appear in the cache before it is forgotten (the pod's creation failed
// after admission, or another webhook rejected it).
const ledgerTTL = 30 * time.Second

// ledger remembers the clusters the webhook assigned to pods that the pod
// cache has not shown yet. A ReplicaSet creates a burst of pods faster than
// the cache sees them; without the ledger every pod of the burst would see
// the same counts and go to the same cluster.
type ledger struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	pending map[types.UID]map[string]assignment // template UID → assignment ID → assignment
	// arrivals counts the pods the cache has shown (arrived); it orders
	// them against the snapshots of liveView.epoch.
	arrivals uint64
}

type assignment struct {
	cluster string
	cost    int32
	expires time.Time
	// arrival is the arrivals count at which the cache showed the pod, 0
	// while it has not.
	arrival uint64
}

// liveView is what the pod cache shows of a template's pods that are not
// finished or being deleted.
type liveView struct {
	counts map[string]int32 // per cluster
	// seen holds the assignment IDs of the cached pods.
	seen map[string]bool
	// costs holds the pod-deletion-costs the pods have, per cluster.
	costs map[string]map[int32]bool
	// epoch is the ledger's epoch() read before the cache was listed: the
	// view shows every pod that arrived up to it, except those gone since.
	epoch uint64
	// revisions holds the revisions of the pods (revisionOf).
	revisions map[string]bool
}

func newLedger(c clock.PassiveClock) *ledger {
	return &ledger{clock: c, pending: map[types.UID]map[string]assignment{}}
}

// reserve picks the cluster of a pod being admitted and its
// pod-deletion-cost there, and records them, in one step. pick sees the
// template's counts: the live pods per cluster plus the assignments the
// cache has not shown yet (those of cached pods are dropped). The cost is
// costAt(cluster, rank) for the lowest rank whose cost neither a live pod
// of that cluster nor a pending assignment holds: the cluster's next rank
// when its pods are ranks 1..n, and the rank of a replica that went (a pod
// deleted or evicted out of turn) when there is a gap, so no two pods of a
// cluster share a cost and a scale-down deletes in the decision's order.
// Admissions run concurrently: counted and recorded apart, two of them
// would see the same counts, land in the same cluster and get the same
// cost.
func (l *ledger) reserve(template types.UID, id string, live liveView, pick func(map[string]int32) string, costAt func(cluster string, rank int32) int32) (string, int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := l.countsLocked(template, live)
	c := pick(counts)
	taken := map[int32]bool{}
	for cost := range live.costs[c] {
		taken[cost] = true
	}
	m := l.pending[template]
	for _, a := range m {
		if a.cluster == c {
			taken[a.cost] = true
		}
	}
	// counts[c] pods hold at most counts[c] costs: one of the first
	// counts[c]+1 ranks is free, unless costs saturate.
	var cost int32
	for rank := int32(1); rank <= counts[c]+1; rank++ {
		if cost = costAt(c, rank); !taken[cost] {
			break
		}
	}
	if m == nil {
		m = map[string]assignment{}
		l.pending[template] = m
	}
	m[id] = assignment{cluster: c, cost: cost, expires: l.clock.Now().Add(ledgerTTL)}
	return c, cost
}

// epoch is read before a liveView's pods are listed from the cache.
func (l *ledger) epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.arrivals
}

// arrived records that the cache now shows an assignment's pod (the
// informer stores a pod before it calls its handlers). A view listed after
// that no longer counts the assignment, whether it shows the pod or the pod
// has gone since: without this an assignment whose pod came and went before
// the template's next admission (a burst scaled down at once) would stay
// counted until ledgerTTL, and the next replicas would go elsewhere and get
// ranks, so deletion costs, that do not follow the decision. A view listed
// before it still counts the assignment: dropping it then would leave its
// pod counted nowhere, and a concurrent admission would take its cost.
func (l *ledger) arrived(template types.UID, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.pending[template]
	if a, ok := m[id]; ok && a.arrival == 0 {
		l.arrivals++
		a.arrival = l.arrivals
		m[id] = a
	}
	// Arrived assignments are dropped by the template's next admission;
	// those of a template that has none are dropped here once expired (no
	// admission lasts as long).
	now := l.clock.Now()
	for id, a := range m {
		if a.arrival != 0 && now.After(a.expires) {
			delete(m, id)
		}
	}
	if m != nil && len(m) == 0 {
		delete(l.pending, template)
	}
}

// counts is what reserve's pick sees, for a caller that records nothing.
func (l *ledger) counts(template types.UID, live liveView) map[string]int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.countsLocked(template, live)
}

func (l *ledger) countsLocked(template types.UID, live liveView) map[string]int32 {
	out := make(map[string]int32, len(live.counts))
	for c, n := range live.counts {
		out[c] = n
	}
	now := l.clock.Now()
	for id, a := range l.pending[template] {
		if live.seen[id] || (a.arrival != 0 && a.arrival <= live.epoch) || now.After(a.expires) {
			delete(l.pending[template], id)
			continue
		}
		out[a.cluster]++
	}
	if len(l.pending[template]) == 0 {
		delete(l.pending, template)
	}
	return out
}

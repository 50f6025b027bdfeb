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
}

type assignment struct {
	cluster string
	expires time.Time
}

func newLedger(c clock.PassiveClock) *ledger {
	return &ledger{clock: c, pending: map[types.UID]map[string]assignment{}}
}

// reserve picks the cluster of a pod being admitted and records it, in one
// step: pick sees the template's counts (live, the template's pods per
// cluster as the cache shows them, plus the assignments the cache has not
// shown yet; seen holds the assignment IDs of the cached pods, whose
// entries are dropped). It returns the cluster and the pod's rank there (1
// for the cluster's first replica). Admissions run concurrently: counted
// and recorded apart, two of them would see the same counts, land in the
// same cluster and get the same rank, so the same pod-deletion-cost.
func (l *ledger) reserve(template types.UID, id string, live map[string]int32, seen map[string]bool, pick func(map[string]int32) string) (string, int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := l.countsLocked(template, live, seen)
	c := pick(counts)
	m := l.pending[template]
	if m == nil {
		m = map[string]assignment{}
		l.pending[template] = m
	}
	m[id] = assignment{cluster: c, expires: l.clock.Now().Add(ledgerTTL)}
	return c, counts[c] + 1
}

// counts is what reserve's pick sees, for a caller that records nothing.
func (l *ledger) counts(template types.UID, live map[string]int32, seen map[string]bool) map[string]int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.countsLocked(template, live, seen)
}

func (l *ledger) countsLocked(template types.UID, live map[string]int32, seen map[string]bool) map[string]int32 {
	out := make(map[string]int32, len(live))
	for c, n := range live {
		out[c] = n
	}
	now := l.clock.Now()
	for id, a := range l.pending[template] {
		if seen[id] || now.After(a.expires) {
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

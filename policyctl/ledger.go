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

// add records that the pod with assignment id was given cluster.
func (l *ledger) add(template types.UID, id, cluster string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.pending[template]
	if m == nil {
		m = map[string]assignment{}
		l.pending[template] = m
	}
	m[id] = assignment{cluster: cluster, expires: l.clock.Now().Add(ledgerTTL)}
}

// counts adds to live (the template's pods per cluster as the cache shows
// them) the assignments the cache has not shown yet; seen holds the
// assignment IDs of the cached pods, whose entries are dropped.
func (l *ledger) counts(template types.UID, live map[string]int32, seen map[string]bool) map[string]int32 {
	out := make(map[string]int32, len(live))
	for c, n := range live {
		out[c] = n
	}
	l.mu.Lock()
	defer l.mu.Unlock()
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

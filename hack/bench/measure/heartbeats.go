// Virtual nodes' lease renewals and readiness as the host sees them.

package measure

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Heartbeats follows the health of a set of virtual nodes as the host sees
// it, through one watch on the node Leases in kube-node-lease and one on the
// Nodes: every renewal of each Lease (its renewTime) and every time a node
// stops or starts being usable — Ready=True and free of the not-ready and
// unreachable taints the node lifecycle controller adds when a lease runs
// out.
type Heartbeats struct {
	names    map[string]bool
	now      func() time.Time
	notifier *Notifier

	mu       sync.Mutex
	renewals map[string][]time.Time // renewTime of every renewal seen, by lease
	usable   map[string]bool        // current state, by node
	changes  []usableChange         // every change of state, in order
	stop     context.CancelFunc
}

// usableChange is a node becoming usable or unusable.
type usableChange struct {
	node   string
	at     time.Time
	usable bool
	why    string // when not usable
}

func newHeartbeats(names []string, now func() time.Time) *Heartbeats {
	h := &Heartbeats{names: map[string]bool{}, now: now, notifier: NewNotifier(),
		renewals: map[string][]time.Time{}, usable: map[string]bool{}, stop: func() {}}
	for _, n := range names {
		h.names[n] = true
	}
	return h
}

// WatchHeartbeats starts following names in the host and returns once both
// watches have listed what exists. Stop it when done.
func WatchHeartbeats(ctx context.Context, c kubernetes.Interface, names []string) (*Heartbeats, error) {
	h := newHeartbeats(names, time.Now)
	wctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	run := func(lw cache.ListerWatcher, obj runtime.Object, observe func(any, bool)) cache.InformerSynced {
		_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
			ListerWatcher: lw,
			ObjectType:    obj,
			Handler: cache.ResourceEventHandlerFuncs{
				AddFunc:    func(o any) { observe(o, false) },
				UpdateFunc: func(_, o any) { observe(o, false) },
				DeleteFunc: func(o any) { observe(o, true) },
			},
		})
		go ctrl.RunWithContext(wctx)
		return ctrl.HasSynced
	}
	leases := run(cache.NewListWatchFromClient(c.CoordinationV1().RESTClient(), "leases", corev1.NamespaceNodeLease, fields.Everything()),
		&coordinationv1.Lease{}, func(o any, _ bool) { h.observeLease(o) })
	nodes := run(cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "nodes", corev1.NamespaceAll, fields.Everything()),
		&corev1.Node{}, h.observeNode)
	if !cache.WaitForCacheSync(ctx.Done(), leases, nodes) {
		cancel()
		return nil, fmt.Errorf("watch node leases and nodes: %w", ctx.Err())
	}
	return h, nil
}

// Stop ends the watches.
func (h *Heartbeats) Stop() { h.stop() }

func (h *Heartbeats) observeLease(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || !h.names[l.Name] || l.Spec.RenewTime == nil {
		return
	}
	rt := l.Spec.RenewTime.Time
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.renewals[l.Name]
	if len(rs) == 0 || rt.After(rs[len(rs)-1]) {
		h.renewals[l.Name] = append(rs, rt)
	}
}

func (h *Heartbeats) observeNode(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok || !h.names[n.Name] {
		return
	}
	usable, why := nodeUsable(n)
	if deleted {
		usable, why = false, "deleted"
	}
	now := h.now()
	defer h.notifier.notify()
	h.mu.Lock()
	defer h.mu.Unlock()
	if was, seen := h.usable[n.Name]; seen && was == usable {
		return
	}
	h.usable[n.Name] = usable
	h.changes = append(h.changes, usableChange{node: n.Name, at: now, usable: usable, why: why})
}

// nodeUsable reports whether the host scheduler may place pods on n, and
// why not: what fleet.WaitVirtualNodeReady waits for.
func nodeUsable(n *corev1.Node) (bool, string) {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false, "tainted " + t.Key
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return true, ""
			}
			msg := c.Message
			if len(msg) > 160 {
				msg = msg[:160] + "…"
			}
			return false, strings.TrimSpace(fmt.Sprintf("Ready=%s %s %s", c.Status, c.Reason, msg))
		}
	}
	return false, "no Ready condition"
}

// WaitUsable waits until every node in names is usable and returns when
// the last of them became so, after since (a node usable already before
// since counts from since).
func (h *Heartbeats) WaitUsable(ctx context.Context, names []string, since time.Time) (time.Time, error) {
	for {
		changed := h.notifier.changed()
		h.mu.Lock()
		last := since
		missing := 0
		for _, n := range names {
			if !h.usable[n] {
				missing++
			}
		}
		for _, c := range h.changes {
			if c.usable && c.at.After(last) && slices.Contains(names, c.node) {
				last = c.at
			}
		}
		h.mu.Unlock()
		if missing == 0 {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d virtual nodes not Ready: %w", missing, len(names), ctx.Err())
		case <-changed:
		}
	}
}

// HeartbeatStats is how the nodes fared in a window of time.
type HeartbeatStats struct {
	// Renewals counts the lease renewals in the window; MinRenewals is the
	// fewest of any one lease, Unrenewed how many leases had none.
	Renewals, MinRenewals, Unrenewed int
	// MaxGap is the longest time a lease went without renewal: between two
	// renewals, or from the last one to the end of the window.
	MaxGap time.Duration
	// Late counts the gaps longer than the late threshold given to stats.
	Late int
	// Lost counts nodes ceasing to be usable in the window, and Unusable
	// sums the time nodes spent unusable in it.
	Lost     int
	Unusable time.Duration
	// Why lists the first few losses.
	Why []string
}

// Stats describes the window (from, to]. A gap is counted in the window it
// ends in.
func (h *Heartbeats) Stats(from, to time.Time, late time.Duration) HeartbeatStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := HeartbeatStats{MinRenewals: -1}
	for name := range h.names {
		var prev time.Time
		n := 0
		for _, rt := range h.renewals[name] {
			if rt.After(to) {
				break
			}
			if rt.After(from) {
				n++
				if !prev.IsZero() {
					gap := rt.Sub(prev)
					s.MaxGap = max(s.MaxGap, gap)
					if gap > late {
						s.Late++
					}
				}
			}
			prev = rt
		}
		if prev.IsZero() {
			prev = from // never renewed: the whole window is a gap
		}
		if tail := to.Sub(prev); tail > 0 {
			s.MaxGap = max(s.MaxGap, tail)
			if tail > late {
				s.Late++
			}
		}
		s.Renewals += n
		if n == 0 {
			s.Unrenewed++
		}
		if s.MinRenewals < 0 || n < s.MinRenewals {
			s.MinRenewals = n
		}
	}
	if s.MinRenewals < 0 {
		s.MinRenewals = 0
	}

	// Replay the changes to know each node's state across the window.
	usable := map[string]bool{}
	since := map[string]time.Time{} // when a node became unusable
	for _, c := range h.changes {
		if c.at.After(to) {
			break
		}
		was, seen := usable[c.node]
		usable[c.node] = c.usable
		switch {
		case !c.usable && (!seen || was):
			since[c.node] = c.at
			if c.at.After(from) && seen {
				s.Lost++
				if len(s.Why) < 5 {
					s.Why = append(s.Why, fmt.Sprintf("%s at %s: %s", c.node, c.at.Format("15:04:05.000"), c.why))
				}
			}
		case c.usable && seen && !was:
			s.Unusable += overlap(since[c.node], c.at, from, to)
			delete(since, c.node)
		}
	}
	for name := range h.names {
		if !usable[name] {
			start, ok := since[name]
			if !ok {
				start = from // never seen
			}
			s.Unusable += overlap(start, to, from, to)
		}
	}
	slices.Sort(s.Why)
	return s
}

// overlap is the length of [a, b] within [from, to].
func overlap(a, b, from, to time.Time) time.Duration {
	if a.Before(from) {
		a = from
	}
	if b.After(to) {
		b = to
	}
	return max(0, b.Sub(a))
}

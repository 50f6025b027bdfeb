// This file keeps what one member's API knows of pods, as flotilla-node
// learns it: from the member's schema when it connects, and from what the
// member answers to the pods it is sent.

package podfields

import (
	"slices"
	"sync"
)

// Member is what one member cluster's API knows of pods: its version, the
// pod fields flotilla's types know and it does not serve, and those it
// was seen to drop (a feature gate off there). The virtual nodes of the
// member publish it in their fit models and the pod providers consult and
// add to it. It is safe for concurrent use; its lists are bounded by the
// number of pod fields.
type Member struct {
	mu      sync.Mutex
	version string
	unknown []string
	dropped []string
	beyond  []string
	notify  []func()
}

// MemberFields is a copy of what a Member holds.
type MemberFields struct {
	Version string
	// Unknown and Dropped are sorted paths.
	Unknown, Dropped []string
	// Beyond are the pod status fields the member serves and flotilla's
	// types do not know: none while flotilla's types are at least the
	// member's release, which they are on every supported version.
	Beyond []string
}

// Fields returns a copy of what m holds.
func (m *Member) Fields() MemberFields {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MemberFields{Version: m.version, Unknown: slices.Clone(m.unknown), Dropped: slices.Clone(m.dropped), Beyond: slices.Clone(m.beyond)}
}

// OnChange has f called, without m's lock, whenever what m holds changes.
func (m *Member) OnChange(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notify = append(m.notify, f)
}

// Served records the member's version and the fields it does not serve,
// as read from its schema. A new version forgets the fields the member
// was seen to drop: its gates may differ now.
func (m *Member) Served(version string, unknown []string) {
	m.change(func() bool {
		changed := version != m.version || !slices.Equal(unknown, m.unknown)
		if version != m.version {
			m.dropped = nil
		}
		m.version, m.unknown = version, slices.Clone(unknown)
		return changed
	})
}

// ServesBeyond records the pod status fields the member serves and
// flotilla's types do not know (MemberFields.Beyond). Placement does not
// depend on them: it changes nothing a virtual node publishes.
func (m *Member) ServesBeyond(paths []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.beyond = slices.Clone(paths)
}

// Unknown adds fields the member refused as unknown (strict field
// validation), and reports whether any was new.
func (m *Member) Unknown(paths ...string) bool {
	return m.change(func() bool { return add(&m.unknown, paths) })
}

// Dropped adds fields the member stored empty although a pod was sent
// with them, and reports whether any was new.
func (m *Member) Dropped(paths ...string) bool {
	return m.change(func() bool { return add(&m.dropped, paths) })
}

func (m *Member) change(f func() bool) bool {
	m.mu.Lock()
	changed := f()
	notify := slices.Clone(m.notify)
	m.mu.Unlock()
	if changed {
		for _, n := range notify {
			n()
		}
	}
	return changed
}

func add(list *[]string, paths []string) bool {
	changed := false
	for _, p := range paths {
		if i, found := slices.BinarySearch(*list, p); !found {
			*list = slices.Insert(*list, i, p)
			changed = true
		}
	}
	return changed
}

// Refusal is a field of a pod that a member cannot run, and why.
type Refusal struct {
	Path string
	// Dropped is true when the member drops the field (a feature gate
	// off), false when it does not know it.
	Dropped bool
}

// Refuses returns the first field of f that pod sets, if any: the member
// cannot run the pod as written.
func (f MemberFields) Refuses(sets func(path string) bool) (Refusal, bool) {
	for _, p := range f.Unknown {
		if sets(p) {
			return Refusal{Path: p}, true
		}
	}
	for _, p := range f.Dropped {
		if sets(p) {
			return Refusal{Path: p, Dropped: true}, true
		}
	}
	return Refusal{}, false
}

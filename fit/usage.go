package fit

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Use is what pods request of a node, in the model's units (cpu in
// millicores, every other resource in its unit), with the number of pods
// under "pods".
type Use map[corev1.ResourceName]int64

// useOf is what p requests of its node.
func useOf(p *corev1.Pod) Use {
	u := Use{corev1.ResourcePods: 1}
	for name, q := range PodRequests(p) {
		if name != corev1.ResourcePods {
			u[name] += value(name, q)
		}
	}
	return u
}

// Usage keeps, for each node, the sum of what the pods bound to it request,
// up to date as pods come, change and go. A virtual node is rebuilt after
// every burst of member changes; summing every pod of the member at each
// rebuild made a burst of n pods cost in proportion to n², where keeping
// the sums costs in proportion to n. Pods that have finished (Succeeded,
// Failed) or are not bound to a node request nothing.
//
// Pods fall into groups (group, when not nil, names a pod's), and the sums
// are also kept per group, so that a virtual node can tell the pods it
// forwarded from the others on the same node; per group and priority for
// the pods of a named group (the room the host preempting them would
// make); and per priority for all pods (the room the member's scheduler
// preempting them would make).
//
// It is safe for concurrent use.
type Usage struct {
	group func(metav1.Object) string

	mu    sync.Mutex
	pods  map[types.UID]podUse
	nodes map[string]*nodeUse
	// shared holds each distinct Use of the pods once: the pods of one
	// workload ask for the same.
	shared map[string]*sharedUse
}

type podUse struct {
	node, group string
	priority    int32
	// generation is the pod's when its use was read: the apiserver bumps
	// it on every change of the spec (Kubernetes 1.33 and later), so the
	// same generation on the same node is the same use. 0 reads it again.
	generation int64
	use        *sharedUse
}

type sharedUse struct {
	key  string
	refs int
	use  Use
}

type nodeUse struct {
	all    Use
	groups map[string]Use
	// byPriority holds the sums of the pods of each named group, by
	// their priority, and allByPriority those of every pod.
	byPriority    map[string]map[int32]Use
	allByPriority map[int32]Use
}

// NewUsage returns an empty Usage; group, when not nil, names the group of
// a pod.
func NewUsage(group func(metav1.Object) string) *Usage {
	return &Usage{group: group, pods: map[types.UID]podUse{}, nodes: map[string]*nodeUse{}, shared: map[string]*sharedUse{}}
}

// UsageOf returns the usage of pods, a list of distinct pods.
func UsageOf(pods []*corev1.Pod, group func(metav1.Object) string) *Usage {
	u := NewUsage(group)
	for _, p := range pods {
		if counts(&p.Spec, p.Status.Phase) {
			u.add(p.Spec.NodeName, u.groupOf(p), priorityOf(&p.Spec), useOf(p), 1)
		}
	}
	return u
}

// priorityOf is a pod's priority as its apiserver resolved it, 0 when
// none was.
func priorityOf(spec *corev1.PodSpec) int32 {
	if spec.Priority == nil {
		return 0
	}
	return *spec.Priority
}

func counts(spec *corev1.PodSpec, phase corev1.PodPhase) bool {
	return spec.NodeName != "" && phase != corev1.PodSucceeded && phase != corev1.PodFailed
}

func (u *Usage) groupOf(o metav1.Object) string {
	if u.group == nil {
		return ""
	}
	return u.group(o)
}

// Set records p as it is now, in place of what was recorded of it.
func (u *Usage) Set(p *corev1.Pod) {
	u.set(&p.ObjectMeta, &p.Spec, p.Status.Phase, p)
}

// SetOf is Set of a pod given as its metadata, its spec (what PodRequests
// reads of it, and its node) and its phase: as a cache that keeps less of
// a pod than a corev1.Pod holds it.
func (u *Usage) SetOf(meta *metav1.ObjectMeta, spec *corev1.PodSpec, phase corev1.PodPhase) {
	u.set(meta, spec, phase, nil)
}

// set is Set of the pod p, or, when p is nil, of the one made of the rest.
func (u *Usage) set(meta *metav1.ObjectMeta, spec *corev1.PodSpec, phase corev1.PodPhase, p *corev1.Pod) {
	if !counts(spec, phase) {
		u.Delete(meta.UID)
		return
	}
	group := u.groupOf(meta)
	u.mu.Lock()
	defer u.mu.Unlock()
	old, ok := u.pods[meta.UID]
	priority := priorityOf(spec)
	if ok && old.node == spec.NodeName && old.group == group && old.priority == priority && old.generation != 0 && old.generation == meta.Generation {
		return
	}
	if p == nil {
		p = &corev1.Pod{ObjectMeta: *meta, Spec: *spec, Status: corev1.PodStatus{Phase: phase}}
	}
	s := u.share(useOf(p))
	if ok {
		u.add(old.node, old.group, old.priority, old.use.use, -1)
		u.release(old.use)
	}
	u.pods[meta.UID] = podUse{node: spec.NodeName, group: group, priority: priority, generation: meta.Generation, use: s}
	u.add(spec.NodeName, group, priority, s.use, 1)
}

// Delete forgets the pod with uid.
func (u *Usage) Delete(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	old, ok := u.pods[uid]
	if !ok {
		return
	}
	delete(u.pods, uid)
	u.add(old.node, old.group, old.priority, old.use.use, -1)
	u.release(old.use)
}

// Of returns what the pods on node request, all of them and those of group.
// Both are the caller's.
func (u *Usage) Of(node, group string) (all, ofGroup Use) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := u.nodes[node]
	if n == nil {
		return Use{}, Use{}
	}
	return maps.Clone(n.all), maps.Clone(n.groups[group])
}

// ByPriority returns what the pods of group on node request, by their
// priority; the caller's. The pods of the unnamed group are not kept so.
func (u *Usage) ByPriority(node, group string) map[int32]Use {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := u.nodes[node]
	if n == nil || len(n.byPriority[group]) == 0 {
		return nil
	}
	return cloneByPriority(n.byPriority[group])
}

// AllByPriority returns what every pod on node requests, by priority;
// the caller's.
func (u *Usage) AllByPriority(node string) map[int32]Use {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := u.nodes[node]
	if n == nil || len(n.allByPriority) == 0 {
		return nil
	}
	return cloneByPriority(n.allByPriority)
}

func cloneByPriority(byP map[int32]Use) map[int32]Use {
	out := make(map[int32]Use, len(byP))
	for p, use := range byP {
		out[p] = maps.Clone(use)
	}
	return out
}

// Len is the number of pods recorded.
func (u *Usage) Len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.pods)
}

// add adds sign times use, of a pod of group with priority, to node's
// sums, forgetting the sums that fall to no pods. Call it with mu held.
func (u *Usage) add(node, group string, priority int32, use Use, sign int64) {
	n := u.nodes[node]
	if n == nil {
		n = &nodeUse{all: Use{}, groups: map[string]Use{}, byPriority: map[string]map[int32]Use{}, allByPriority: map[int32]Use{}}
		u.nodes[node] = n
	}
	if group != "" {
		byP := n.byPriority[group]
		if byP == nil {
			byP = map[int32]Use{}
			n.byPriority[group] = byP
		}
		addAt(byP, priority, use, sign)
		if len(byP) == 0 {
			delete(n.byPriority, group)
		}
	}
	addAt(n.allByPriority, priority, use, sign)
	g := n.groups[group]
	if g == nil {
		g = Use{}
		n.groups[group] = g
	}
	for name, v := range use {
		addTo(n.all, name, sign*v)
		addTo(g, name, sign*v)
	}
	if g[corev1.ResourcePods] == 0 {
		delete(n.groups, group)
	}
	if n.all[corev1.ResourcePods] == 0 {
		delete(u.nodes, node)
	}
}

// addAt adds sign times use to byP's sum at priority, forgetting it when
// it falls to no pods.
func addAt(byP map[int32]Use, priority int32, use Use, sign int64) {
	p := byP[priority]
	if p == nil {
		p = Use{}
		byP[priority] = p
	}
	for name, v := range use {
		addTo(p, name, sign*v)
	}
	if p[corev1.ResourcePods] == 0 {
		delete(byP, priority)
	}
}

func addTo(u Use, name corev1.ResourceName, v int64) {
	if x := u[name] + v; x != 0 {
		u[name] = x
	} else {
		delete(u, name)
	}
}

// share returns the Use kept equal to use, keeping use if there is none,
// with one more reference. Call it with mu held.
func (u *Usage) share(use Use) *sharedUse {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(use)) {
		b.WriteString(string(name))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(use[name], 10))
		b.WriteByte(',')
	}
	key := b.String()
	s, ok := u.shared[key]
	if !ok {
		s = &sharedUse{key: key, use: use}
		u.shared[key] = s
	}
	s.refs++
	return s
}

// release drops a reference to s. Call it with mu held.
func (u *Usage) release(s *sharedUse) {
	if s.refs--; s.refs == 0 {
		delete(u.shared, s.key)
	}
}

package fit

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limits that keep a model small whatever the cluster's size.
const (
	// MaxGroups is the most groups a model holds; the nodes of smaller
	// groups beyond it are counted in Model.Omitted.
	MaxGroups = 32
	// MaxSlots is the most distinct free vectors a group holds.
	MaxSlots = 32
	// MaxPriorities is the most priorities a group tells preemptible room
	// for, in each of its two lists, and MaxPreemptSlots the most free
	// vectors it keeps for each: the room preempting makes at most triples
	// a model's size. The lowest priorities are kept, and the vectors
	// rounded as Free's are, so a pod is told of less room than preempting
	// would make, never more.
	MaxPriorities   = 4
	MaxPreemptSlots = 8
)

// Model describes the member nodes behind one virtual node.
type Model struct {
	// Resources names the dimensions of every vector in the model, in
	// order. cpu is in millicores, every other resource in its unit.
	Resources []corev1.ResourceName `json:"resources"`
	// Groups are the nodes, grouped by what a pod's constraints can tell
	// apart: labels and taints.
	Groups []Group `json:"groups,omitempty"`
	// Omitted counts the nodes left out of Groups to keep the model small.
	Omitted int `json:"omitted,omitempty"`
	// Grow, when the cluster can add nodes, are the shapes of the nodes it
	// can add.
	Grow []Shape `json:"grow,omitempty"`
	// Kubernetes is the member's Kubernetes version ("v1.34.4"), when
	// known. Older models have none, and older readers ignore it.
	Kubernetes string `json:"kubernetes,omitempty"`
	// UnknownFields are the pod fields flotilla's types know and the
	// member's API does not serve, by path ("spec.schedulingGroup",
	// "spec.volumes[].emptyDir.mode"; see package podfields): the member
	// would prune them from a pod. DroppedFields are those the member
	// stored empty when a pod was sent with them (a feature gate off
	// there). A pod that sets one cannot run in the cluster. Older models
	// have none, and older readers ignore them.
	UnknownFields []string `json:"unknownFields,omitempty"`
	DroppedFields []string `json:"droppedFields,omitempty"`
}

// Group is a set of member nodes with the same labels and taints.
type Group struct {
	// Labels are the nodes' labels, without those that tell single nodes
	// apart (a hostname): a pod selecting those cannot be placed by
	// cluster anyway.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are the nodes' NoSchedule and NoExecute taints.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Free holds the distinct free vectors of the group's nodes.
	Free []Slot `json:"free"`
	// Largest is, per resource, the most any one node of the group has
	// free: exact even when Free was rounded, so messages can say it.
	Largest []int64 `json:"largest"`
	// Preempt is what the nodes would have free if the host preempted
	// pods of low priority there, one entry per priority of the pods the
	// virtual node forwarded to them, lowest first. Older models have
	// none, and older readers ignore it.
	Preempt []Preemptible `json:"preempt,omitempty"`
	// MemberPreempt is what the nodes would have free if the member's
	// scheduler preempted pods of low priority there, whoever made them:
	// Preempt with the member's own pods counted too. Only a pod bound
	// to the virtual node reaches that scheduler, so placement sends a
	// pod there itself. It is left out where the member runs no pods of
	// its own on the group's nodes (Preempt says it all); older models
	// have none, and older readers ignore it.
	MemberPreempt []Preemptible `json:"memberPreempt,omitempty"`
}

// Preemptible is the room a group's nodes would have if the pods with
// priority Upto or lower were preempted there: in Group.Preempt those the
// virtual node forwarded (the host scheduler sees them bound to the
// virtual node, so it can preempt them), in Group.MemberPreempt every pod
// (the member's scheduler sees them all).
type Preemptible struct {
	Upto int32  `json:"upto"`
	Free []Slot `json:"free"`
}

// Slot is a free vector and how many nodes have (at least) it.
type Slot struct {
	Nodes int     `json:"n"`
	Free  []int64 `json:"v"`
}

// Shape is a node a cluster can add: its labels, taints and allocatable.
type Shape struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Taints      []corev1.Taint    `json:"taints,omitempty"`
	Allocatable []int64           `json:"allocatable"`
}

// NodeShape is a node a cluster can add, as configured.
type NodeShape struct {
	Labels      map[string]string
	Taints      []corev1.Taint
	Allocatable corev1.ResourceList
}

// Encode returns the model as published on the virtual node.
func (m *Model) Encode() string {
	b, err := json.Marshal(m)
	if err != nil {
		// A Model holds only strings, ints and taints.
		panic(fmt.Sprintf("fit: encode model: %v", err))
	}
	return string(b)
}

// Decode reads a model published on a virtual node.
func Decode(s string) (*Model, error) {
	m := &Model{}
	if err := json.Unmarshal([]byte(s), m); err != nil {
		return nil, fmt.Errorf("decode fit model: %w", err)
	}
	for _, g := range m.Groups {
		if len(g.Largest) != len(m.Resources) {
			return nil, fmt.Errorf("decode fit model: a group has %d resources, want %d", len(g.Largest), len(m.Resources))
		}
		for _, s := range g.Free {
			if len(s.Free) != len(m.Resources) {
				return nil, fmt.Errorf("decode fit model: a slot has %d resources, want %d", len(s.Free), len(m.Resources))
			}
		}
	}
	for _, g := range m.Groups {
		for _, p := range slices.Concat(g.Preempt, g.MemberPreempt) {
			for _, s := range p.Free {
				if len(s.Free) != len(m.Resources) {
					return nil, fmt.Errorf("decode fit model: a preemptible slot has %d resources, want %d", len(s.Free), len(m.Resources))
				}
			}
		}
	}
	for _, s := range m.Grow {
		if len(s.Allocatable) != len(m.Resources) {
			return nil, fmt.Errorf("decode fit model: a shape has %d resources, want %d", len(s.Allocatable), len(m.Resources))
		}
	}
	return m, nil
}

// value is q in the unit the model uses for name.
func value(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// quantity formats v of resource name for a message.
func quantity(name corev1.ResourceName, v int64) string {
	switch {
	case name == corev1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	case name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return resource.NewQuantity(v, resource.DecimalSI).String()
}

// Build returns the model of nodes, the member nodes a virtual node stands
// for (already filtered to the Ready, schedulable ones of its slice), given
// every member pod: a pod bound to one of the nodes and not finished uses
// its requests there, whoever created it. grow, when not nil, says the
// cluster can add nodes: of the shapes given, or when there are none, of
// the shape of its largest node.
func Build(nodes []*corev1.Node, pods []*corev1.Pod, grow []NodeShape) *Model {
	return BuildOf(nodes, pods, nil, grow)
}

// BuildOf is Build where forwarded, when not nil, tells the pods the
// virtual node forwarded: what they hold, by priority, is room the host
// can make by preempting them, and what all pods hold, by priority, room
// the member's scheduler can make.
func BuildOf(nodes []*corev1.Node, pods []*corev1.Pod, forwarded func(*corev1.Pod) bool, grow []NodeShape) *Model {
	on := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		on[n.Name] = true
	}
	var group func(metav1.Object) string
	if forwarded != nil {
		group = func(o metav1.Object) string {
			if p, ok := o.(*corev1.Pod); ok && forwarded(p) {
				return forwardedGroup
			}
			return ""
		}
	}
	u := UsageOf(slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool { return !on[p.Spec.NodeName] }), group)
	return BuildFrom(nodes, func(node string) NodeUse {
		all, _ := u.Of(node, "")
		if forwarded == nil {
			return NodeUse{All: all}
		}
		return NodeUse{All: all, Preemptible: u.ByPriority(node, forwardedGroup), ByPriority: u.AllByPriority(node)}
	}, grow)
}

// forwardedGroup is BuildOf's group of the pods the virtual node forwarded.
const forwardedGroup = "forwarded"

// NodeUse is what the pods on a member node request: all of them; by
// priority, those the host can preempt (the pods the virtual node
// forwarded); and by priority, all of them, which the member's scheduler
// can preempt. Without ByPriority the model tells no room the member's
// scheduler makes.
type NodeUse struct {
	All         Use
	Preemptible map[int32]Use
	ByPriority  map[int32]Use
}

// BuildFrom is Build given what the pods on each node request.
func BuildFrom(nodes []*corev1.Node, used func(node string) NodeUse, grow []NodeShape) *Model {
	m := &Model{}
	index := map[corev1.ResourceName]int{}
	dim := func(name corev1.ResourceName) int {
		if i, ok := index[name]; ok {
			return i
		}
		index[name] = len(m.Resources)
		m.Resources = append(m.Resources, name)
		return len(m.Resources) - 1
	}
	// cpu, memory and pods first, in this order, for readable models.
	dim(corev1.ResourceCPU)
	dim(corev1.ResourceMemory)
	dim(corev1.ResourcePods)
	for _, n := range nodes {
		for _, name := range slices.Sorted(maps.Keys(n.Status.Allocatable)) {
			dim(name)
		}
	}
	for _, s := range grow {
		for _, name := range slices.Sorted(maps.Keys(s.Allocatable)) {
			dim(name)
		}
	}

	// left is what each node has left, below zero where its pods ask
	// more than it has; free is that, from zero up.
	left := make([][]int64, len(nodes))
	free := make([][]int64, len(nodes))
	preemptible := make([]map[int32]Use, len(nodes))
	byPriority := make([]map[int32]Use, len(nodes))
	for i, n := range nodes {
		v := make([]int64, len(m.Resources))
		for name, q := range n.Status.Allocatable {
			v[index[name]] = value(name, q)
		}
		u := used(n.Name)
		for name, x := range u.All {
			if d, ok := index[name]; ok {
				v[d] -= x
			}
		}
		left[i], preemptible[i], byPriority[i] = v, u.Preemptible, u.ByPriority
		free[i] = atLeastZero(v)
	}

	labels := publishedLabels(nodes)
	groups := map[string]*Group{}
	members := map[string][]int{}
	var keys []string
	for i, n := range nodes {
		g := Group{Labels: labels[i], Taints: schedulingTaints(n.Spec.Taints)}
		k := groupKey(g)
		if _, ok := groups[k]; !ok {
			groups[k] = &g
			keys = append(keys, k)
		}
		members[k] = append(members[k], i)
	}
	// Largest groups first; past MaxGroups the rest are omitted.
	slices.SortStableFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(members[b]), len(members[a])), strings.Compare(a, b))
	})
	for j, k := range keys {
		if j >= MaxGroups {
			m.Omitted += len(members[k])
			continue
		}
		g := groups[k]
		vectors := make([][]int64, 0, len(members[k]))
		g.Largest = make([]int64, len(m.Resources))
		for _, i := range members[k] {
			vectors = append(vectors, free[i])
			for d, x := range free[i] {
				g.Largest[d] = max(g.Largest[d], x)
			}
		}
		g.Free = slots(vectors, g.Largest, MaxSlots)
		g.Preempt = preemptSlots(members[k], left, preemptible, index)
		if holdsOwnPods(members[k], preemptible, byPriority) {
			g.MemberPreempt = preemptSlots(members[k], left, byPriority, index)
		}
		m.Groups = append(m.Groups, *g)
	}

	if grow != nil {
		m.Grow = shapes(m, index, nodes, labels, grow)
	}
	return m
}

func atLeastZero(v []int64) []int64 {
	out := make([]int64, len(v))
	for d, x := range v {
		out[d] = max(x, 0)
	}
	return out
}

// preemptSlots returns, for the nodes of one group (indexes into left and
// preemptible), the room preempting would make: for each priority of the
// pods preemptible counts on them, lowest first and at most MaxPriorities,
// the nodes' free vectors if every such pod of that priority or lower
// were gone.
func preemptSlots(group []int, left [][]int64, preemptible []map[int32]Use, index map[corev1.ResourceName]int) []Preemptible {
	var priorities []int32
	for _, i := range group {
		for p := range preemptible[i] {
			if !slices.Contains(priorities, p) {
				priorities = append(priorities, p)
			}
		}
	}
	slices.Sort(priorities)
	if len(priorities) > MaxPriorities {
		priorities = priorities[:MaxPriorities]
	}
	var out []Preemptible
	for _, upto := range priorities {
		vectors := make([][]int64, 0, len(group))
		largest := make([]int64, len(left[group[0]]))
		for _, i := range group {
			v := slices.Clone(left[i])
			for p, u := range preemptible[i] {
				if p > upto {
					continue
				}
				for name, x := range u {
					if d, ok := index[name]; ok {
						v[d] += x
					}
				}
			}
			v = atLeastZero(v)
			vectors = append(vectors, v)
			for d, x := range v {
				largest[d] = max(largest[d], x)
			}
		}
		out = append(out, Preemptible{Upto: upto, Free: slots(vectors, largest, MaxPreemptSlots)})
	}
	return out
}

// holdsOwnPods reports whether, on the nodes of one group (indexes into
// preemptible and all), pods run that the host cannot preempt: all counts
// more pods than preemptible.
func holdsOwnPods(group []int, preemptible, all []map[int32]Use) bool {
	pods := func(byP map[int32]Use) int64 {
		var n int64
		for _, u := range byP {
			n += u[corev1.ResourcePods]
		}
		return n
	}
	for _, i := range group {
		if pods(all[i]) > pods(preemptible[i]) {
			return true
		}
	}
	return false
}

// shapes returns the shapes a growable cluster can add: those configured,
// or the shape of its largest node.
func shapes(m *Model, index map[corev1.ResourceName]int, nodes []*corev1.Node, labels []map[string]string, grow []NodeShape) []Shape {
	var out []Shape
	for _, s := range grow {
		v := make([]int64, len(m.Resources))
		for name, q := range s.Allocatable {
			v[index[name]] = value(name, q)
		}
		if _, ok := s.Allocatable[corev1.ResourcePods]; !ok {
			// The kubelet's default when a shape does not say.
			v[index[corev1.ResourcePods]] = 110
		}
		out = append(out, Shape{Labels: s.Labels, Taints: schedulingTaints(s.Taints), Allocatable: v})
	}
	if len(out) > 0 || len(nodes) == 0 {
		return out
	}
	largest := 0
	size := func(n *corev1.Node) (int64, int64) {
		return value(corev1.ResourceCPU, n.Status.Allocatable[corev1.ResourceCPU]), value(corev1.ResourceMemory, n.Status.Allocatable[corev1.ResourceMemory])
	}
	for i, n := range nodes {
		c, mm := size(n)
		lc, lm := size(nodes[largest])
		if c > lc || (c == lc && mm > lm) {
			largest = i
		}
	}
	n := nodes[largest]
	v := make([]int64, len(m.Resources))
	for name, q := range n.Status.Allocatable {
		v[index[name]] = value(name, q)
	}
	return []Shape{{Labels: labels[largest], Taints: schedulingTaints(n.Spec.Taints), Allocatable: v}}
}

// publishedLabels returns, per node, the labels a pod's selector can
// meaningfully ask of the cluster: without the hostname (the virtual
// node's own replaces it) and, when the nodes would otherwise form more
// than MaxGroups groups, without the keys with the most distinct values
// (instance IDs and the like), one at a time, until they do not. A key
// only some nodes carry (disk=ssd on one of them) is kept.
func publishedLabels(nodes []*corev1.Node) []map[string]string {
	out := make([]map[string]string, len(nodes))
	values := map[string]map[string]bool{}
	for i, n := range nodes {
		l := make(map[string]string, len(n.Labels))
		for k, v := range n.Labels {
			if k == corev1.LabelHostname || v == n.Name {
				continue
			}
			l[k] = v
			if values[k] == nil {
				values[k] = map[string]bool{}
			}
			values[k][v] = true
		}
		out[i] = l
	}
	for {
		groups := map[string]bool{}
		for _, l := range out {
			groups[groupKey(Group{Labels: l})] = true
		}
		if len(groups) <= MaxGroups || len(values) == 0 {
			return out
		}
		widest := ""
		for k, vs := range values {
			if widest == "" || len(vs) > len(values[widest]) || (len(vs) == len(values[widest]) && k < widest) {
				widest = k
			}
		}
		delete(values, widest)
		for _, l := range out {
			delete(l, widest)
		}
	}
}

// schedulingTaints are the taints that keep pods off a node.
func schedulingTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	slices.SortFunc(out, func(a, b corev1.Taint) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Value, b.Value), strings.Compare(string(a.Effect), string(b.Effect)))
	})
	return out
}

func groupKey(g Group) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(g.Labels)) {
		fmt.Fprintf(&b, "%s=%s\x00", k, g.Labels[k])
	}
	b.WriteString("\x01")
	for _, t := range g.Taints {
		fmt.Fprintf(&b, "%s=%s:%s\x00", t.Key, t.Value, t.Effect)
	}
	return b.String()
}

// slots returns the distinct free vectors, at most limit of them: when
// there are more, every resource is rounded down to a grid of
// largest/2^k, coarser until they fit.
func slots(vectors [][]int64, largest []int64, limit int) []Slot {
	out := distinct(vectors, nil)
	for k := 6; len(out) > limit && k >= 0; k-- {
		step := make([]int64, len(largest))
		for d, l := range largest {
			step[d] = max(l>>k, 1)
		}
		out = distinct(vectors, step)
	}
	if len(out) > limit {
		// Still too many: keep the largest, and fold the rest into
		// their common minimum, which each of them has free.
		slices.SortStableFunc(out, func(a, b Slot) int { return cmp.Compare(total(b.Free, largest), total(a.Free, largest)) })
		rest := Slot{Free: slices.Clone(out[limit-1].Free)}
		for _, s := range out[limit-1:] {
			rest.Nodes += s.Nodes
			for d := range rest.Free {
				rest.Free[d] = min(rest.Free[d], s.Free[d])
			}
		}
		out = append(out[:limit-1], rest)
	}
	slices.SortFunc(out, func(a, b Slot) int { return slices.Compare(b.Free, a.Free) })
	return out
}

// total is a vector's size relative to largest, for ordering only.
func total(v, largest []int64) float64 {
	var t float64
	for d, x := range v {
		if largest[d] > 0 {
			t += float64(x) / float64(largest[d])
		}
	}
	return t
}

// distinct counts the vectors, each rounded down to step when given.
func distinct(vectors [][]int64, step []int64) []Slot {
	seen := map[string]int{}
	var out []Slot
	var key strings.Builder
	for _, v := range vectors {
		r := v
		if step != nil {
			r = make([]int64, len(v))
			for d, x := range v {
				r[d] = x - x%step[d]
			}
		}
		key.Reset()
		for _, x := range r {
			fmt.Fprintf(&key, "%d,", x)
		}
		if i, ok := seen[key.String()]; ok {
			out[i].Nodes++
			continue
		}
		seen[key.String()] = len(out)
		out = append(out, Slot{Nodes: 1, Free: slices.Clone(r)})
	}
	return out
}

package fit

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"flotilla.io/flotilla/internal/podfields"
	"flotilla.io/flotilla/internal/wellknown"
)

// Demand is what a pod asks of a member node.
type Demand struct {
	pod         *corev1.Pod
	affinity    nodeaffinity.RequiredNodeAffinity
	requests    corev1.ResourceList
	tolerations []corev1.Toleration
	// priority is the pod's, and preempts whether it may preempt pods of
	// lower priority to make room (its preemption policy is not Never).
	priority int32
	preempts bool
}

// DemandOf returns what pod asks of a member node: its requests as the
// scheduler counts them, its node selector and required node affinity,
// its tolerations, and its priority as the host's admission resolved it
// (spec.priority) with its preemption policy. The pod is read, not kept
// past the call's users.
func DemandOf(pod *corev1.Pod) Demand {
	return Demand{
		pod:         pod,
		affinity:    nodeaffinity.GetRequiredNodeAffinity(pod),
		requests:    resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
		tolerations: pod.Spec.Tolerations,
		priority:    priorityOf(&pod.Spec),
		preempts: pod.Spec.Priority != nil &&
			(pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != corev1.PreemptNever),
	}
}

// Cluster is one virtual node and the model it publishes, prepared for
// checking pods: each group is seen as a node carrying the group's labels
// overlaid with the virtual node's own (a selector on the cluster's name,
// region or configured labels matches every node of it).
type Cluster struct {
	Name string
	// Model is nil when the virtual node publishes none (an older
	// flotilla-node): placement then trusts the host scheduler's sum.
	Model  *Model
	groups []*corev1.Node
	shapes []*corev1.Node
}

// NewCluster prepares vnode's model. A model that cannot be read is an
// error; a missing one gives a Cluster without a Model.
func NewCluster(vnode *corev1.Node) (*Cluster, error) {
	c := &Cluster{Name: vnode.Name}
	s, ok := vnode.Annotations[wellknown.FitModelAnnotation]
	if !ok {
		return c, nil
	}
	m, err := Decode(s)
	if err != nil {
		return nil, fmt.Errorf("virtual node %s: %w", vnode.Name, err)
	}
	return NewClusterOf(vnode.Name, vnode.Labels, m), nil
}

// NewClusterOf prepares model m of the virtual node name with labels.
func NewClusterOf(name string, labels map[string]string, m *Model) *Cluster {
	c := &Cluster{Name: name, Model: m}
	node := func(l map[string]string) *corev1.Node {
		merged := make(map[string]string, len(l)+len(labels))
		maps.Copy(merged, l)
		maps.Copy(merged, labels)
		n := &corev1.Node{}
		n.Name, n.Labels = name, merged
		return n
	}
	for _, g := range m.Groups {
		c.groups = append(c.groups, node(g.Labels))
	}
	for _, s := range m.Grow {
		c.shapes = append(c.shapes, node(s.Labels))
	}
	return c
}

// Verdict is a cluster's answer for one pod.
type Verdict struct {
	// Fits is true when at least one member node could hold the pod now,
	// or when the cluster's model cannot tell (see Known).
	Fits bool
	// Known is false when the answer is a guess: no model, or nodes
	// left out of it.
	Known bool
	// Reason says why the pod does not fit, as a user reads it:
	// "no node with 20 cpu free (largest 12)".
	Reason string
	// Preempting is true when the pod does not fit now but would on one
	// member node if the host preempted pods of lower priority there:
	// the host scheduler's preemption can make the room.
	Preempting bool
	// MemberPreempting is true when the pod does not fit now but would on
	// one member node if the member's scheduler preempted pods of lower
	// priority there, the member's own among them (Group.MemberPreempt):
	// the host cannot preempt those, so only a pod bound to the cluster
	// has that room made.
	MemberPreempting bool
}

// want is a demand expressed in a model's dimensions.
type want struct {
	v       []int64
	missing []corev1.ResourceName // requested, and no node has any
}

func (c *Cluster) want(d Demand) want {
	m := c.Model
	w := want{v: make([]int64, len(m.Resources))}
	for _, name := range slices.Sorted(maps.Keys(d.requests)) {
		q := d.requests[name]
		if q.Sign() <= 0 {
			continue
		}
		i := slices.Index(m.Resources, name)
		if i < 0 {
			w.missing = append(w.missing, name)
			continue
		}
		w.v[i] = value(name, q)
	}
	if i := slices.Index(m.Resources, corev1.ResourcePods); i >= 0 {
		w.v[i] = 1
	}
	return w
}

func covers(free, want []int64) bool {
	for d, x := range want {
		if free[d] < x {
			return false
		}
	}
	return true
}

// eligible reports whether pods with d may go to node (labels) with taints,
// and when not because of a taint, which.
func eligible(d Demand, node *corev1.Node, taints []corev1.Taint) (labelsMatch bool, untolerated *corev1.Taint) {
	if ok, err := d.affinity.Match(node); err != nil || !ok {
		return false, nil
	}
	if t, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, d.tolerations, nil, false); bad {
		return true, &t
	}
	return true, nil
}

// Check answers whether at least one member node could hold the pod.
func (c *Cluster) Check(d Demand) Verdict {
	m := c.Model
	if m == nil {
		return Verdict{Fits: true}
	}
	if why := c.fieldRefusal(d); why != "" {
		return Verdict{Known: true, Reason: why}
	}
	w := c.want(d)
	matched := false
	var taint *corev1.Taint
	largest := make([]int64, len(m.Resources))
	tolerated, preempting, memberPreempting := false, false, false
	for i, g := range m.Groups {
		ok, t := eligible(d, c.groups[i], g.Taints)
		if !ok {
			continue
		}
		matched = true
		if t != nil {
			if taint == nil {
				taint = t
			}
			continue
		}
		tolerated = true
		for dd, x := range g.Largest {
			largest[dd] = max(largest[dd], x)
		}
		if len(w.missing) > 0 {
			continue
		}
		for _, s := range g.Free {
			if covers(s.Free, w.v) {
				return Verdict{Fits: true, Known: true}
			}
		}
		preempting = preempting || (d.preempts && fitsPreempting(g.Preempt, d.priority, w.v))
		memberPreempting = memberPreempting || (d.preempts && fitsPreempting(g.MemberPreempt, d.priority, w.v))
	}
	if m.Omitted > 0 {
		return Verdict{Fits: true, Reason: fmt.Sprintf("%d nodes are not in the model", m.Omitted)}
	}
	switch {
	case !matched:
		if sel := describeSelector(d.pod); sel != "" {
			return Verdict{Known: true, Reason: "no node matches " + sel}
		}
		return Verdict{Known: true, Reason: "no node matches the pod's node affinity"}
	case !tolerated:
		return Verdict{Known: true, Reason: "no node tolerates taint " + taint.ToString()}
	case len(w.missing) > 0:
		return Verdict{Known: true, Reason: "no node has " + joinNames(w.missing)}
	}
	return Verdict{Known: true, Reason: shortfall(m, w.v, largest), Preempting: preempting, MemberPreempting: memberPreempting}
}

// fitsPreempting reports whether want fits a node of a group once the
// pods of priority below priority that room (a group's Preempt or
// MemberPreempt) counts are gone.
func fitsPreempting(room []Preemptible, priority int32, want []int64) bool {
	// The entries are lowest first: the last one below the pod's
	// priority frees the most.
	var best *Preemptible
	for i := range room {
		if room[i].Upto < priority {
			best = &room[i]
		}
	}
	if best == nil {
		return false
	}
	for _, s := range best.Free {
		if covers(s.Free, want) {
			return true
		}
	}
	return false
}

// shortfall explains why no slot covers want although the nodes match.
func shortfall(m *Model, want, largest []int64) string {
	var short, all []string
	for d, x := range want {
		if x == 0 {
			continue
		}
		name := m.Resources[d]
		if name == corev1.ResourcePods {
			if largest[d] < 1 {
				short = append(short, "no node with room for another pod")
			}
			continue
		}
		all = append(all, quantity(name, x)+" "+string(name))
		if largest[d] < x {
			short = append(short, fmt.Sprintf("no node with %s %s free (largest %s)", quantity(name, x), name, quantity(name, largest[d])))
		}
	}
	if len(short) > 0 {
		return strings.Join(short, ", ")
	}
	return "no node with " + strings.Join(all, " and ") + " free at once"
}

// Replicas returns how many copies of the pod the member nodes could hold
// now, and whether the model can tell.
func (c *Cluster) Replicas(d Demand) (int64, bool) {
	m := c.Model
	if m == nil || m.Omitted > 0 {
		return 0, false
	}
	if c.fieldRefusal(d) != "" {
		return 0, true
	}
	w := c.want(d)
	if len(w.missing) > 0 {
		return 0, true
	}
	var n int64
	for i, g := range m.Groups {
		if ok, t := eligible(d, c.groups[i], g.Taints); !ok || t != nil {
			continue
		}
		for _, s := range g.Free {
			n += int64(s.Nodes) * copies(s.Free, w.v)
		}
	}
	return n, true
}

// copies is how many times want fits in free.
func copies(free, want []int64) int64 {
	n := int64(-1)
	for d, x := range want {
		if x <= 0 {
			continue
		}
		if k := free[d] / x; n < 0 || k < n {
			n = k
		}
	}
	return max(n, 0)
}

// CanGrow reports whether a node the cluster can add would hold the pod.
func (c *Cluster) CanGrow(d Demand) bool {
	m := c.Model
	if m == nil || len(m.Grow) == 0 || c.fieldRefusal(d) != "" {
		return false
	}
	w := c.want(d)
	if len(w.missing) > 0 {
		return false
	}
	for i, s := range m.Grow {
		if ok, t := eligible(d, c.shapes[i], s.Taints); ok && t == nil && covers(s.Allocatable, w.v) {
			return true
		}
	}
	return false
}

func joinNames(names []corev1.ResourceName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// describeSelector renders the member-level part of the pod's node
// selector and required node affinity, for messages: keys placement
// itself adds (under flotilla.io/) are left out.
func describeSelector(pod *corev1.Pod) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(pod.Spec.NodeSelector)) {
		if !strings.HasPrefix(k, wellknown.Prefix) {
			parts = append(parts, k+"="+pod.Spec.NodeSelector[k])
		}
	}
	var terms []string
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			var exprs []string
			for _, r := range t.MatchExpressions {
				if strings.HasPrefix(r.Key, wellknown.Prefix) {
					continue
				}
				switch r.Operator {
				case corev1.NodeSelectorOpIn:
					if len(r.Values) == 1 {
						exprs = append(exprs, r.Key+"="+r.Values[0])
						continue
					}
				case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
					exprs = append(exprs, fmt.Sprintf("%s %s", r.Key, r.Operator))
					continue
				}
				exprs = append(exprs, fmt.Sprintf("%s %s [%s]", r.Key, r.Operator, strings.Join(r.Values, ",")))
			}
			if len(exprs) > 0 {
				terms = append(terms, strings.Join(exprs, ", "))
			}
		}
	}
	if len(terms) == 1 {
		parts = append(parts, terms[0])
	} else if len(terms) > 1 {
		parts = append(parts, "("+strings.Join(terms, ") or (")+")")
	}
	return strings.Join(parts, ", ")
}

// MemberConstraints are a pod's own node selector and required node
// affinity, kept in wellknown.MemberConstraintsAnnotation when placement
// replaced them, for the host scheduler, by the clusters that fit: they
// still choose the node inside the member.
type MemberConstraints struct {
	NodeSelector map[string]string    `json:"nodeSelector,omitempty"`
	Required     *corev1.NodeSelector `json:"required,omitempty"`
}

// Restore gives s these constraints back: its node selector and required
// node affinity, as the pod was written for the member.
func (mc MemberConstraints) Restore(s *corev1.PodSpec) {
	s.NodeSelector = mc.NodeSelector
	if mc.Required != nil || (s.Affinity != nil && s.Affinity.NodeAffinity != nil) {
		if s.Affinity == nil {
			s.Affinity = &corev1.Affinity{}
		}
		if s.Affinity.NodeAffinity == nil {
			s.Affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = mc.Required
	}
}

// MemberConstraintsOf returns the constraints kept on pod, if any.
func MemberConstraintsOf(pod *corev1.Pod) (MemberConstraints, bool, error) {
	s, ok := pod.Annotations[wellknown.MemberConstraintsAnnotation]
	if !ok {
		return MemberConstraints{}, false, nil
	}
	var mc MemberConstraints
	if err := json.Unmarshal([]byte(s), &mc); err != nil {
		return MemberConstraints{}, false, fmt.Errorf("annotation %s: %w", wellknown.MemberConstraintsAnnotation, err)
	}
	return mc, true, nil
}

// fieldRefusal says why the cluster cannot run the pod when it sets a
// field the member does not know or drops; "" when it sets none. The
// lists are short (the fields a release added since the member's), and
// each is looked up along its path only.
func (c *Cluster) fieldRefusal(d Demand) string {
	m := c.Model
	for _, p := range m.UnknownFields {
		if podfields.Sets(d.pod, p) {
			return UnknownFieldReason(p, m.Kubernetes, c.Name)
		}
	}
	for _, p := range m.DroppedFields {
		if podfields.Sets(d.pod, p) {
			return DroppedFieldReason(p, m.Kubernetes, c.Name)
		}
	}
	return ""
}

// UnknownFieldReason says that the member of cluster, at version, does
// not know the pod field at path: "spec.schedulingGroup is not known to
// Kubernetes v1.34.4 in cluster shenzhen".
func UnknownFieldReason(path, version, cluster string) string {
	return fmt.Sprintf("%s is not known to %s in cluster %s", path, kubernetes(version), cluster)
}

// DroppedFieldReason says that the member of cluster, at version, stored
// a pod without the field at path that it was sent with: a feature gate
// is off there.
func DroppedFieldReason(path, version, cluster string) string {
	return fmt.Sprintf("%s is dropped by %s in cluster %s (its feature gate is off there)", path, kubernetes(version), cluster)
}

func kubernetes(version string) string {
	if version == "" {
		return "the Kubernetes version"
	}
	return "Kubernetes " + version
}

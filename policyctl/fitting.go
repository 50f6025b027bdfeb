package policyctl

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
)

// fitter checks pods against the fit models the virtual nodes publish.
type fitter struct {
	cache    client.Reader
	clock    clock.Clock
	refusals *refusals

	mu       sync.Mutex
	clusters map[string]preparedCluster // by virtual node name
}

type preparedCluster struct {
	resourceVersion string
	cluster         *fit.Cluster
}

func newFitter(cache client.Reader, clk clock.Clock, cooldown time.Duration) *fitter {
	return &fitter{cache: cache, clock: clk, refusals: newRefusals(clk, cooldown), clusters: map[string]preparedCluster{}}
}

// fitting is the answer of every cluster a pod may go to.
type fitting struct {
	// candidates are the virtual nodes whose taints the pod tolerates,
	// sorted by name; hostAccepts those of them whose own labels the
	// pod's node affinity accepts.
	candidates  []*corev1.Node
	hostAccepts map[string]bool
	fits        []string
	// preempting are the clusters where the pod fits a member node once
	// the host preempts lower-priority pods there, when none fits now.
	preempting []string
	// memberPreempting are the clusters where the pod fits a member node
	// once the member's scheduler preempts lower-priority pods there, the
	// member's own among them, when none fits now or by the host's
	// preemption; member is the one placement sends the pod to.
	memberPreempting []string
	member           string
	// grow is a cluster that can add a node for the pod, when none fits,
	// even by preempting.
	grow string
	// why holds the reason of each candidate that does not fit.
	why map[string]string
	// hostNodes reports whether a node of the host itself could take the pod.
	hostNodes bool
}

// verdict renders the clusters' answers: "0/3 clusters can run this pod:
// beijing: ...; hangzhou: ...".
func (f fitting) verdict() string {
	var parts []string
	for _, n := range f.candidates {
		if r, ok := f.why[n.Name]; ok {
			parts = append(parts, n.Name+": "+r)
		}
	}
	if n := len(f.preempting) + len(f.memberPreempting); n > 0 {
		return fmt.Sprintf("%d/%d clusters can run this pod now, %d by preempting lower-priority pods: %s",
			len(f.fits), len(f.candidates), n, strings.Join(parts, "; "))
	}
	return fmt.Sprintf("%d/%d clusters can run this pod: %s", len(f.fits), len(f.candidates), strings.Join(parts, "; "))
}

// targets are the clusters the pod may go to: those it fits now; when
// there are none, those it fits by the host preempting lower-priority pods
// (as a single cluster's scheduler preempts at once, where a new node
// takes minutes); when there are none, the one whose own scheduler can
// preempt for it; when there is none of those either, the one that can
// add a node for it.
func (f fitting) targets() []string {
	switch {
	case len(f.fits) > 0:
		return f.fits
	case len(f.preempting) > 0:
		return f.preempting
	case f.member != "":
		return []string{f.member}
	case f.grow != "":
		return []string{f.grow}
	}
	return nil
}

// sendTo is the cluster placement binds the pod to itself, where the host
// scheduler would not: the host's sum of a cluster leaves out what the
// member's own pods hold, so it can neither see the room its scheduler
// would make by preempting them (member), nor a node yet to be added
// (grow). "" when the host scheduler places the pod.
func (f fitting) sendTo() string {
	if len(f.fits) > 0 || len(f.preempting) > 0 {
		return ""
	}
	return cmp.Or(f.member, f.grow)
}

// evaluate asks every cluster the pod may go to whether it fits.
func (f *fitter) evaluate(ctx context.Context, pod *corev1.Pod) (fitting, error) {
	var nodes corev1.NodeList
	// Read only: the cache's own objects, not copies.
	if err := f.cache.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return fitting{}, fmt.Errorf("list nodes: %w", err)
	}
	// A held pod's constraints were moved for the member: judge by those.
	if mc, ok, err := fit.MemberConstraintsOf(pod); err == nil && ok {
		own := pod.DeepCopy()
		own.Spec.NodeSelector = mc.NodeSelector
		nodeAffinity(own).RequiredDuringSchedulingIgnoredDuringExecution = mc.Required
		pod = own
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	out := fitting{hostAccepts: map[string]bool{}, why: map[string]string{}}
	home, claim, err := f.dataHome(ctx, pod)
	if err != nil {
		return fitting{}, err
	}
	owner := controllerUID(pod)
	d := fit.DemandOf(pod)
	var growable []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !isVirtualNode(n) {
			if !out.hostNodes && !n.Spec.Unschedulable && podstate.NodeReady(n) && tolerated(pod, n) {
				ok, err := required.Match(n)
				out.hostNodes = err == nil && ok
			}
			continue
		}
		if n.Spec.Unschedulable || !tolerated(pod, n) {
			continue
		}
		out.candidates = append(out.candidates, n)
		ok, err := required.Match(n)
		out.hostAccepts[n.Name] = err == nil && ok
		c, err := f.cluster(n)
		if err != nil {
			// A model flotilla-node wrote and this process cannot read
			// (a newer version): the host scheduler's sum decides.
			out.fits = append(out.fits, n.Name)
			continue
		}
		if home != "" && n.Name != home {
			out.why[n.Name] = fmt.Sprintf("claim %s holds its data in cluster %s", claim, home)
			continue
		}
		if r, ok := f.refusals.holds(owner, n.Name); ok {
			out.why[n.Name] = r
			continue
		}
		v := c.Check(d)
		switch {
		case v.Fits:
			out.fits = append(out.fits, n.Name)
		case v.Preempting:
			out.preempting = append(out.preempting, n.Name)
			out.why[n.Name] = v.Reason + "; fits in " + n.Name + " by preempting lower-priority pods"
		case v.MemberPreempting:
			out.memberPreempting = append(out.memberPreempting, n.Name)
			out.why[n.Name] = v.Reason + "; fits in " + n.Name + " by its scheduler preempting lower-priority pods there"
		default:
			out.why[n.Name] = v.Reason
			if c.CanGrow(d) {
				growable = append(growable, n.Name)
			}
		}
	}
	if home != "" && !slices.ContainsFunc(out.candidates, func(n *corev1.Node) bool { return n.Name == home }) {
		// Its cluster is dark, cordoned or gone: the pod waits for it
		// rather than start elsewhere without its data.
		out.why[home] = fmt.Sprintf("claim %s holds its data here and the cluster cannot take pods now (%s); the pod waits for it. "+
			"To start afresh elsewhere without that data, delete the claim and this pod", claim, f.homeState(ctx, home))
		out.candidates = append(out.candidates, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: home}})
		out.grow = ""
		growable = nil
	}
	slices.SortFunc(out.candidates, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(out.fits)
	slices.Sort(out.preempting)
	slices.Sort(out.memberPreempting)
	if len(out.fits) == 0 && len(out.preempting) == 0 && len(out.memberPreempting) > 0 {
		// One cluster for all, as for growth below: the host scheduler
		// does not place these pods, so nothing spreads a burst.
		out.member = out.memberPreempting[0]
		growable = nil
	}
	if len(out.fits) == 0 && len(out.preempting) == 0 && len(growable) > 0 {
		// One cluster for all: an autoscaler adds nodes for the pods
		// Pending in its own cluster, and a burst spread over several
		// would make each add a node, or none.
		slices.Sort(growable)
		out.grow = growable[0]
	}
	return out, nil
}

// dataHome is the cluster holding the data of a pod's claims: the cluster
// of the flotilla volume its first bound claim is bound to, and that
// claim's name; "" for a pod without such a claim.
func (f *fitter) dataHome(ctx context.Context, pod *corev1.Pod) (cluster, claim string, err error) {
	for _, v := range pod.Spec.Volumes {
		name := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			name = pod.Name + "-" + v.Name
		default:
			continue
		}
		var c corev1.PersistentVolumeClaim
		err := f.cache.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, &c)
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return "", "", fmt.Errorf("read claim %s/%s: %w", pod.Namespace, name, err)
		}
		if c.Spec.VolumeName == "" {
			continue
		}
		var pv corev1.PersistentVolume
		err = f.cache.Get(ctx, client.ObjectKey{Name: c.Spec.VolumeName}, &pv)
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return "", "", fmt.Errorf("read volume %s: %w", c.Spec.VolumeName, err)
		}
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == wellknown.VolumeDriver && pv.Labels[wellknown.ClusterLabel] != "" {
			return pv.Labels[wellknown.ClusterLabel], name, nil
		}
	}
	return "", "", nil
}

// homeState says why a cluster cannot take pods: NotReady and why,
// cordoned, or gone.
func (f *fitter) homeState(ctx context.Context, name string) string {
	var n corev1.Node
	if err := f.cache.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return "its virtual node is gone"
	}
	if !podstate.NodeReady(&n) {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Message != "" {
				return "NotReady: " + c.Message
			}
		}
		return "NotReady"
	}
	if n.Spec.Unschedulable {
		return "cordoned"
	}
	return "its taints are not tolerated"
}

// cluster returns n's prepared model, decoding it again only when the
// node changed.
func (f *fitter) cluster(n *corev1.Node) (*fit.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.clusters[n.Name]; ok && c.resourceVersion == n.ResourceVersion {
		return c.cluster, nil
	}
	c, err := fit.NewCluster(n)
	if err != nil {
		return nil, err
	}
	f.clusters[n.Name] = preparedCluster{resourceVersion: n.ResourceVersion, cluster: c}
	return c, nil
}

// forgetNode drops what is kept for a deleted virtual node.
func (f *fitter) forgetNode(name string) {
	f.mu.Lock()
	delete(f.clusters, name)
	f.mu.Unlock()
}

// tolerated reports whether pod tolerates the taints that keep pods off n.
func tolerated(pod *corev1.Pod, n *corev1.Node) bool {
	_, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !bad
}

func controllerUID(pod *corev1.Pod) types.UID {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return ref.UID
	}
	return ""
}

// applyFit rewrites a pod being created so that the host scheduler only
// binds it to clusters that can run it, and reports whether it changed
// the pod. Where every cluster the pod's own constraints accept fits,
// nothing changes. Where some do not, they are excluded. Where a cluster
// fits only through its member nodes' labels (disk=ssd on one node), the
// pod's node constraints are moved into an annotation for the member and
// replaced, in the host, by the clusters that fit. Where none fits now but
// some fit by preempting lower-priority pods, the pod goes to those, for
// the host scheduler to preempt there. Where only a cluster's own
// scheduler can make room, by preempting the member's own pods, or only a
// cluster that can add a node has room, the pod is bound to that cluster.
// Where none fits and no host node could take the pod, it is held by a
// scheduling gate until one does.
func applyFit(pod *corev1.Pod, f fitting) bool {
	if len(f.candidates) == 0 {
		return false
	}
	fits := f.targets()
	held := len(fits) == 0 && !f.hostNodes
	to := f.sendTo()
	if to != "" && len(pod.Spec.SchedulingGates) > 0 {
		// A pod with scheduling gates cannot be bound: the fit gate
		// holds it too, and binds it once the others are gone.
		to, held = "", true
	}
	if len(f.why) > 0 && !held {
		// A held pod gets it from the gate, with an Event, once it
		// exists (an Event needs the pod's UID).
		setAnnotation(pod, wellknown.FitVerdictAnnotation, f.verdict())
	}
	var excluded, included []string
	for _, n := range f.candidates {
		switch ok := slices.Contains(fits, n.Name); {
		case ok && !f.hostAccepts[n.Name]:
			included = append(included, n.Name)
		case !ok && f.hostAccepts[n.Name]:
			excluded = append(excluded, n.Name)
		}
	}
	switch {
	case to != "" && to == f.member:
		// The host scheduler cannot see the pods in the way: the
		// member's scheduler preempts them once the pod is there.
		memberOnly(pod, fits)
		pod.Spec.NodeName = to
		setAnnotation(pod, wellknown.PreemptingInAnnotation, to)
	case to != "":
		// Its cluster is full: the host scheduler's sum would keep it
		// out, but it must wait in the member, where the autoscaler
		// sees it. Bound at creation, as a scheduler would bind it.
		memberOnly(pod, fits)
		pod.Spec.NodeName = to
		setAnnotation(pod, wellknown.WaitingForNodeAnnotation, to)
	case held:
		memberOnly(pod, nil)
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: wellknown.FitGate})
	case len(included) > 0:
		memberOnly(pod, fits)
	case len(excluded) > 0:
		andEveryTerm(pod, corev1.NodeSelectorRequirement{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpNotIn, Values: excluded})
	default:
		return len(f.why) > 0
	}
	return true
}

// memberOnly moves the pod's node selector and required node affinity to
// the member constraints annotation and gives the host scheduler instead:
// the pod's own terms for the host's own nodes, and one term for the
// clusters that fit (or, while gated, for every cluster: the gate's
// release narrows it to those that fit by adding to it).
func memberOnly(pod *corev1.Pod, clusters []string) {
	mc := fit.MemberConstraints{NodeSelector: pod.Spec.NodeSelector}
	na := nodeAffinity(pod)
	if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		mc.Required = na.RequiredDuringSchedulingIgnoredDuringExecution.DeepCopy()
	}
	b, _ := json.Marshal(mc) // maps and API types only
	setAnnotation(pod, wellknown.MemberConstraintsAnnotation, string(b))

	var selector []corev1.NodeSelectorRequirement
	for _, k := range sortedKeys(pod.Spec.NodeSelector) {
		selector = append(selector, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{pod.Spec.NodeSelector[k]}})
	}
	own := []corev1.NodeSelectorTerm{{}}
	if mc.Required != nil && len(mc.Required.NodeSelectorTerms) > 0 {
		own = mc.Required.NodeSelectorTerms
	}
	var terms []corev1.NodeSelectorTerm
	for _, t := range own {
		if onlyClusters(t) {
			continue // a placed pod's terms name clusters: never a host node
		}
		t = *t.DeepCopy()
		t.MatchExpressions = append(append(t.MatchExpressions, selector...),
			corev1.NodeSelectorRequirement{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpDoesNotExist})
		terms = append(terms, t)
	}
	virtual := corev1.NodeSelectorRequirement{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpExists}
	if len(clusters) > 0 {
		virtual = corev1.NodeSelectorRequirement{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(clusters)}
	}
	terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{virtual}})
	pod.Spec.NodeSelector = nil
	na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
}

// onlyClusters reports whether a term requires a cluster label, so that
// no host node can match it.
func onlyClusters(t corev1.NodeSelectorTerm) bool {
	for _, r := range t.MatchExpressions {
		if r.Key == wellknown.ClusterLabel && (r.Operator == corev1.NodeSelectorOpIn || r.Operator == corev1.NodeSelectorOpExists) {
			return true
		}
	}
	return false
}

// release narrows a gated pod to the clusters that fit and lifts the
// gate. Only additions are allowed to a gated pod's node affinity, so the
// clusters go into the term memberOnly left open for them.
func release(pod *corev1.Pod, clusters []string) {
	na := nodeAffinity(pod)
	if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		for i := range req.NodeSelectorTerms {
			t := &req.NodeSelectorTerms[i]
			if len(t.MatchExpressions) == 1 && t.MatchExpressions[0].Key == wellknown.ClusterLabel && t.MatchExpressions[0].Operator == corev1.NodeSelectorOpExists {
				t.MatchExpressions = append(t.MatchExpressions, corev1.NodeSelectorRequirement{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(clusters)})
			}
		}
	}
	pod.Spec.SchedulingGates = slices.DeleteFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == wellknown.FitGate })
}

// gated reports whether the pod waits for a cluster to fit.
func gated(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == wellknown.FitGate })
}

func nodeAffinity(pod *corev1.Pod) *corev1.NodeAffinity {
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	return pod.Spec.Affinity.NodeAffinity
}

// andEveryTerm adds req to every required node affinity term of pod (to
// a new one if it has none), so it holds whichever term matches.
func andEveryTerm(pod *corev1.Pod, req corev1.NodeSelectorRequirement) {
	na := nodeAffinity(pod)
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, *req.DeepCopy())
	}
}

func setAnnotation(pod *corev1.Pod, k, v string) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[k] = v
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// refusals remembers the clusters that handed back a pod of a controller,
// so that its replacement goes elsewhere while the reason may still hold
// (the fit model did not see it coming, so it cannot tell when it stops).
type refusals struct {
	clock    clock.Clock
	cooldown time.Duration

	mu  sync.Mutex
	got map[types.UID]map[string]refusal
}

type refusal struct {
	at     time.Time
	reason string
}

func newRefusals(clk clock.Clock, cooldown time.Duration) *refusals {
	return &refusals{clock: clk, cooldown: cooldown, got: map[types.UID]map[string]refusal{}}
}

// record notes that cluster handed back a pod of controller owner.
func (r *refusals) record(owner types.UID, cluster, reason string) {
	if owner == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked()
	if r.got[owner] == nil {
		r.got[owner] = map[string]refusal{}
	}
	r.got[owner][cluster] = refusal{at: r.clock.Now(), reason: reason}
}

// holds returns why cluster is avoided for the pods of owner, if it is.
func (r *refusals) holds(owner types.UID, cluster string) (string, bool) {
	if owner == "" {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	got, ok := r.got[owner][cluster]
	if !ok || r.clock.Since(got.at) >= r.cooldown {
		return "", false
	}
	return fmt.Sprintf("handed back a pod of the same controller %s ago (%s)", r.clock.Since(got.at).Round(time.Second), got.reason), true
}

// expireLocked drops what is past its cooldown, so the map stays bounded
// by the refusals of one cooldown.
func (r *refusals) expireLocked() {
	for owner, byCluster := range r.got {
		for c, got := range byCluster {
			if r.clock.Since(got.at) >= r.cooldown {
				delete(byCluster, c)
			}
		}
		if len(byCluster) == 0 {
			delete(r.got, owner)
		}
	}
}

// len is the number of controllers with a refusal, for tests.
func (r *refusals) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

package policyctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/propagation"
	"flotilla.io/flotilla/workload"
)

// Pod cache indexes: by wellknown.TemplateAnnotation, and by the node a pod is bound to.
const (
	templateIndex = "policy.flotilla.io/template-uid"
	nodeIndex     = "spec.nodeName"
)

// errNotSelected: no policy selects the template.
var errNotSelected = errors.New("no policy selects the template")

// placement is one template's placement under the policy that selects it.
type placement struct {
	policy      string // candidate.ref()
	candidate   candidate
	tolerations []corev1.Toleration
	decision    propagation.Decision
}

// clusters are the chosen clusters, sorted by name.
func (p *placement) clusters() []string {
	out := make([]string, 0, len(p.decision.Targets))
	for _, t := range p.decision.Targets {
		out = append(out, t.Cluster)
	}
	return out
}

// placer computes templates' placements from the cached policies, virtual
// nodes and pods. A decision is kept until the policy, the template's
// replicas or requests, or the set of clusters (names, labels, taints,
// readiness) change — not when free capacity does, so that a burst of pods
// is split by one decision rather than one that drifts as they land.
type placer struct {
	cache client.Reader

	mu        sync.Mutex
	decisions map[types.UID]cachedDecision
}

type cachedDecision struct {
	key      string
	decision propagation.Decision
	err      error
}

func newPlacer(cache client.Reader) *placer {
	return &placer{cache: cache, decisions: map[types.UID]cachedDecision{}}
}

// policyFor returns the policy that places tpl, or errNotSelected.
func (p *placer) policyFor(ctx context.Context, tpl Template) (candidate, error) {
	var pps policyv1alpha1.PropagationPolicyList
	if err := p.cache.List(ctx, &pps, client.InNamespace(tpl.Namespace)); err != nil {
		return candidate{}, fmt.Errorf("list PropagationPolicies: %w", err)
	}
	var cpps policyv1alpha1.ClusterPropagationPolicyList
	if err := p.cache.List(ctx, &cpps); err != nil {
		return candidate{}, fmt.Errorf("list ClusterPropagationPolicies: %w", err)
	}
	all := make([]candidate, 0, len(pps.Items)+len(cpps.Items))
	for i := range pps.Items {
		all = append(all, candidate{&pps.Items[i], &pps.Items[i].Spec})
	}
	for i := range cpps.Items {
		all = append(all, candidate{&cpps.Items[i], &cpps.Items[i].Spec})
	}
	c, ok := choose(all, tpl)
	if !ok {
		return candidate{}, errNotSelected
	}
	return c, nil
}

// placement returns tpl's placement; errNotSelected when no policy selects
// it, a *propagation.Unschedulable when it cannot be placed.
func (p *placer) placement(ctx context.Context, tpl Template) (*placement, error) {
	return p.placementOf(ctx, tpl, nil)
}

// placementOf is placement with the template's object at hand: a bare pod
// being admitted is not stored yet, so it is its own template. Without a
// UID the decision is not cached.
func (p *placer) placementOf(ctx context.Context, tpl Template, obj client.Object) (*placement, error) {
	c, err := p.policyFor(ctx, tpl)
	if err != nil {
		return nil, err
	}
	kind, ok := workload.Lookup(tpl.APIVersion, tpl.Kind)
	if obj == nil {
		obj, kind, err = getTemplate(ctx, p.cache, tpl)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", tpl, err)
		}
	} else if !ok {
		return nil, fmt.Errorf("%s %s is not a workload template flotilla places", tpl.APIVersion, tpl.Kind)
	}
	replicas, spec := kind.Pods(obj)
	request := podRequests(spec)
	var nodes corev1.NodeList
	if err := p.cache.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	key := decisionKey(c, replicas, request, nodes.Items)
	pl := &placement{policy: c.ref(), candidate: c, tolerations: c.spec.Placement.ClusterTolerations}

	p.mu.Lock()
	cached, ok := p.decisions[tpl.UID]
	p.mu.Unlock()
	if ok && cached.key == key {
		pl.decision = cached.decision
		return pl, cached.err
	}
	// Only the pods bound to virtual nodes use their capacity: read them
	// through the node index, without copying them out of the cache.
	var pods []corev1.Pod
	for i := range nodes.Items {
		if !isVirtualNode(&nodes.Items[i]) {
			continue
		}
		var bound corev1.PodList
		if err := p.cache.List(ctx, &bound, client.MatchingFields{nodeIndex: nodes.Items[i].Name}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list pods on %s: %w", nodes.Items[i].Name, err)
		}
		pods = append(pods, bound.Items...)
	}
	clusters := clusterViews(nodes.Items, pods, tpl.UID, spec)
	d, err := propagation.Place(&c.spec.Placement, clusters, propagation.Workload{Replicas: replicas, Request: request})
	if err != nil && !errors.As(err, new(*propagation.Unschedulable)) {
		return nil, err
	}
	if tpl.UID != "" {
		p.mu.Lock()
		p.decisions[tpl.UID] = cachedDecision{key: key, decision: d, err: err}
		p.mu.Unlock()
	}
	pl.decision = d
	return pl, err
}

// forget drops the decision of a template that is gone.
func (p *placer) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.decisions, uid)
}

// live is what the pod cache shows of tpl's pods that are not finished or
// being deleted (ledger.reserve's input). The assignment IDs of leaving
// pods count as seen too: their assignments are done.
func (p *placer) live(ctx context.Context, tpl Template) (liveView, error) {
	pods, err := templatePods(ctx, p.cache, tpl)
	if err != nil {
		return liveView{}, err
	}
	v := liveView{counts: map[string]int32{}, seen: map[string]bool{}, costs: map[string]map[int32]bool{}, revisions: map[string]bool{}}
	for _, pod := range pods {
		v.seen[pod.Annotations[wellknown.AssignmentAnnotation]] = true
		if podstate.Leaving(pod) {
			continue
		}
		v.revisions[revisionOf(pod)] = true
		c := pod.Annotations[wellknown.PolicyClusterAnnotation]
		if c == "" {
			continue
		}
		v.counts[c]++
		if cost, err := strconv.ParseInt(pod.Annotations[wellknown.DeletionCostAnnotation], 10, 32); err == nil {
			if v.costs[c] == nil {
				v.costs[c] = map[int32]bool{}
			}
			v.costs[c][int32(cost)] = true
		}
	}
	return v, nil
}

// decisionKey changes when anything a decision depends on changes, except
// free capacity.
func decisionKey(c candidate, replicas int32, request corev1.ResourceList, nodes []corev1.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d/%d|", c.obj.GetUID(), c.obj.GetGeneration(), replicas)
	names := make([]string, 0, len(request))
	for n := range request {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		q := request[corev1.ResourceName(n)]
		fmt.Fprintf(&b, "%s=%s,", n, q.String())
	}
	var vns []string
	for i := range nodes {
		n := &nodes[i]
		if !isVirtualNode(n) {
			continue
		}
		var s strings.Builder
		fmt.Fprintf(&s, "|%s", n.Name)
		keys := make([]string, 0, len(n.Labels))
		for k := range n.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&s, " %s=%s", k, n.Labels[k])
		}
		// A cluster the policy cannot choose changes the decision only by
		// its name or labels: its readiness flapping, or its taints
		// changing, must not recompute the decisions of every template.
		if propagation.MayUse(&c.spec.Placement, &propagation.Cluster{Name: n.Name, Labels: n.Labels}) {
			fmt.Fprintf(&s, " ready=%t cordoned=%t", podstate.NodeReady(n), n.Spec.Unschedulable)
			for _, t := range n.Spec.Taints {
				fmt.Fprintf(&s, " %s", t.ToString())
			}
		}
		vns = append(vns, s.String())
	}
	slices.Sort(vns)
	b.WriteString(strings.Join(vns, ""))
	return b.String()
}

// templatePods are the pods the webhook placed for tpl, finished and
// terminating ones included, from the cache's index.
func templatePods(ctx context.Context, r client.Reader, tpl Template) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(tpl.Namespace), client.MatchingFields{templateIndex: string(tpl.UID)}); err != nil {
		return nil, fmt.Errorf("list pods of %s: %w", tpl, err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// livePods drops the finished and terminating pods.
func livePods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if !podstate.Leaving(p) {
			out = append(out, p)
		}
	}
	return out
}

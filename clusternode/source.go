// This file holds the source of a virtual node's state: the member's
// nodes, pods and health, turned into the node virtual-kubelet publishes.

package clusternode

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podfields"
)

var _ node.NodeProvider = (*Source)(nil)

// HealthChecker answers whether the member apiserver is reachable.
type HealthChecker interface {
	Healthy(ctx context.Context) error
}

// SourceConfig holds what a Source needs; all fields but Clock are required.
type SourceConfig struct {
	Node Config
	// Informers is the member's shared informer factory; the source only
	// registers the node and pod informers on it and never starts it.
	Informers *kube.Factory
	// Pods follows the member's pods; the virtual nodes of one member
	// share it. When nil, the source registers its own.
	Pods   *MemberPods
	Health HealthChecker
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// HealthInterval is how often the member is checked; FailureThreshold is
	// how many failed checks in a row make the virtual node NotReady.
	HealthInterval   time.Duration
	FailureThreshold int
	// Debounce coalesces bursts of member changes into one recomputation.
	Debounce time.Duration
	// KubeletAPI, when set, probes the kubelet endpoint the way the host
	// apiserver reaches it, every KubeletAPIInterval; FailureThreshold
	// failures in a row set the KubeletAPIUnreachable condition.
	KubeletAPI         HealthChecker
	KubeletAPIInterval time.Duration
	// Fields, when set, is what the member's API knows of pods; the node
	// is rebuilt whenever it changes.
	Fields *podfields.Member
	// ReachabilityChanged, when set, is called (with no lock held) each
	// time the member turns unreachable or answers again; MemberReachable
	// says which.
	ReachabilityChanged func()
}

// Source is the source of a virtual node's state, virtual-kubelet's
// node.NodeProvider for it: it keeps the node in step with its member: it recomputes the
// node on member node and pod changes and on health transitions, and hands
// the result to virtual-kubelet's node controller when it changed.
type Source struct {
	cfg   SourceConfig
	nodes corev1listers.NodeLister
	pods  *MemberPods

	dirty chan struct{}
	// urgent asks for a rebuild without the debounce: what the member
	// knows of pods changed, and until placement sees it every pod a
	// controller makes again is sent where it cannot run.
	urgent chan struct{}

	mu        sync.Mutex
	notify    func(*corev1.Node)
	last      *corev1.Node
	failures  int
	lastError string

	apiProbed   bool
	apiFailures int
	apiError    string

	versions *Versions // nil until SetVersions
}

// NewSource registers the member informers it needs and returns a source
// whose Run must be called once the informers have started.
func NewSource(cfg SourceConfig) (*Source, error) {
	if cfg.Informers == nil || cfg.Health == nil || cfg.Node.Name == "" {
		return nil, errors.New("clusternode: Informers, Health and Node.Name are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = 5 * time.Second
	}
	if cfg.FailureThreshold <= 0 {
		cfg.FailureThreshold = 2
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = 500 * time.Millisecond
	}
	if cfg.KubeletAPIInterval <= 0 {
		cfg.KubeletAPIInterval = 30 * time.Second
	}
	p := &Source{
		cfg:    cfg,
		nodes:  cfg.Informers.Nodes().Lister(),
		pods:   cfg.Pods,
		dirty:  make(chan struct{}, 1),
		urgent: make(chan struct{}, 1),
	}
	if p.pods == nil {
		var err error
		if p.pods, err = NewMemberPods(cfg.Informers); err != nil {
			return nil, err
		}
	}
	// Every virtual node of a process sees every change of the member; it
	// rebuilds only for those that can change it, so that fifty partitions
	// do not each recompute their node for every pod of the others.
	if _, err := cfg.Informers.Nodes().Informer().AddEventHandler(p.dirtyWhen(p.nodeMatters)); err != nil {
		return nil, err
	}
	pods := p.dirtyWhen(p.podMatters).(cache.ResourceEventHandlerFuncs)
	pods.UpdateFunc = func(old, cur any) {
		if p.podUpdateMatters(old, cur) {
			p.markDirty()
		}
	}
	// A pod change reaches it once counted in the member's usage, which
	// the next build reads.
	p.pods.subscribe(pods)
	if cfg.Fields != nil {
		cfg.Fields.OnChange(func() {
			select {
			case p.urgent <- struct{}{}:
			default:
			}
		})
	}
	return p, nil
}

// dirtyWhen marks the node dirty on events whose old or new object matters.
func (p *Source) dirtyWhen(matters func(any) bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if matters(obj) {
				p.markDirty()
			}
		},
		UpdateFunc: func(old, cur any) {
			if matters(old) || matters(cur) {
				p.markDirty()
			}
		},
		DeleteFunc: func(obj any) {
			if matters(obj) {
				p.markDirty()
			}
		},
	}
}

// nodeMatters reports whether a member node is in this virtual node's
// slice: anything about it (readiness, labels, allocatable) may change the
// virtual node.
func (p *Source) nodeMatters(obj any) bool {
	n, ok := objectOf(obj).(*corev1.Node)
	return ok && (p.cfg.Node.Selector == nil || p.cfg.Node.Selector.Matches(labels.Set(n.Labels)))
}

// podMatters reports whether a member pod can change this virtual node:
// it is bound to a node of the slice, so it takes room on that node (the
// fit model) and, unless this virtual node forwarded it (the host
// scheduler counts those), from the sum. A pod whose node is not known yet
// is counted when the node's own event comes.
func (p *Source) podMatters(obj any) bool {
	pod, ok := memberpod.Of(obj)
	if !ok || pod.Spec.NodeName == "" {
		return false
	}
	n, err := p.nodes.Get(pod.Spec.NodeName)
	return err == nil && p.nodeMatters(n)
}

// podUpdateMatters reports whether an update of a member pod can change
// this virtual node. The pods it forwarded change it only when bound or
// finished: their status updates, the bulk of a burst, do not rebuild it.
func (p *Source) podUpdateMatters(old, cur any) bool {
	if !p.podMatters(old) && !p.podMatters(cur) {
		return false
	}
	o, ok1 := memberpod.Of(old)
	c, ok2 := memberpod.Of(cur)
	if !ok1 || !ok2 || !p.cfg.Node.Owner().Owns(c) {
		return true
	}
	return o.Spec.NodeName != c.Spec.NodeName || o.Terminal() != c.Terminal()
}

func objectOf(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func (p *Source) markDirty() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// Ping always succeeds while the host is reachable: the member's health is
// reported through the Ready condition instead, so that the host sees an
// explicit MemberUnreachable reason rather than a silently expiring lease.
func (p *Source) Ping(ctx context.Context) error { return ctx.Err() }

// NotifyNodeStatus registers the node controller's callback.
func (p *Source) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) {
	p.mu.Lock()
	p.notify = cb
	p.mu.Unlock()
	p.markDirty()
}

// Node computes the virtual node from the current member state; use it for
// the node's first registration.
func (p *Source) Node() *corev1.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buildLocked()
}

// Reachable reports what the node's Ready condition says (the member
// answers), without building the node from the member's pods: for a
// metrics scrape.
func (p *Source) Reachable() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failures < p.cfg.FailureThreshold
}

// SetVersions gives the node the host's and the member's Kubernetes
// versions, as last read: its version and its KubernetesVersionSupported
// condition follow them.
func (p *Source) SetVersions(v Versions) {
	p.mu.Lock()
	changed := p.versions == nil || *p.versions != v
	p.versions = &v
	p.mu.Unlock()
	if changed {
		p.markDirty()
	}
}

func (p *Source) buildLocked() *corev1.Node {
	snap := Snapshot{Reachable: p.failures < p.cfg.FailureThreshold, Message: p.lastError, Versions: p.versions} // as Reachable
	if p.cfg.KubeletAPI != nil {
		snap.KubeletAPI = &Probe{Done: p.apiProbed, OK: p.apiFailures < p.cfg.FailureThreshold, Message: p.apiError}
	}
	snap.Nodes, _ = p.nodes.List(labels.Everything())
	snap.Usage = p.pods.Usage()
	if p.cfg.Fields != nil {
		snap.Fields = p.cfg.Fields.Fields()
	}
	return Build(p.cfg.Node, snap, p.last, p.cfg.Clock.Now())
}

// Run checks the member's health and publishes node changes until ctx ends.
func (p *Source) Run(ctx context.Context) {
	p.checkHealth(ctx)
	// Each check starts an interval after the previous one ended rather
	// than on a fixed beat: after a check that a struggling member kept
	// waiting for most of an interval, a ticker would start the next at
	// once, and FailureThreshold failures would span a moment instead of
	// FailureThreshold intervals (the more so as the virtual nodes of one
	// process share answers younger than half an interval).
	health := p.cfg.Clock.NewTimer(p.cfg.HealthInterval)
	defer health.Stop()
	// The kubelet endpoint is probed in the background, so that a probe
	// the network keeps waiting holds up no node update; the next one is
	// due an interval after it ended. With nothing to probe the nil
	// channels never fire.
	var apiTimer clock.Timer
	var apiDue <-chan time.Time
	probed := make(chan bool, 1)
	if p.cfg.KubeletAPI != nil {
		// The first probe comes soon: the condition is Unknown until then.
		apiTimer = p.cfg.Clock.NewTimer(min(p.cfg.KubeletAPIInterval, 5*time.Second))
		defer apiTimer.Stop()
		apiDue = apiTimer.C()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-health.C():
			changed := p.checkHealth(ctx)
			health.Reset(p.cfg.HealthInterval)
			if !changed {
				// Member changes arrive as events; a check that changes
				// nothing the node shows needs no rebuild.
				continue
			}
		case <-apiDue:
			go func() { probed <- p.probeKubeletAPI(ctx) }()
			continue
		case changed := <-probed:
			apiTimer.Reset(p.cfg.KubeletAPIInterval)
			if !changed {
				continue
			}
		case <-p.urgent:
		case <-p.dirty:
			// Let a burst of pod events settle before walking all pods again.
			select {
			case <-ctx.Done():
				return
			case <-p.cfg.Clock.After(p.cfg.Debounce):
			}
		}
		p.publish(ctx)
	}
}

// MemberReachable reports whether the member answers its health checks:
// fewer than FailureThreshold have failed in a row.
func (p *Source) MemberReachable() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failures < p.cfg.FailureThreshold
}

// checkHealth checks the member once and reports whether that changed what
// the virtual node shows: reachable or not, and why not.
func (p *Source) checkHealth(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, p.cfg.HealthInterval)
	err := p.cfg.Health.Healthy(cctx)
	cancel()
	p.mu.Lock()
	reachable := p.failures < p.cfg.FailureThreshold
	changed := p.recordHealth(ctx, err)
	now := p.failures < p.cfg.FailureThreshold
	p.mu.Unlock()
	if now != reachable && p.cfg.ReachabilityChanged != nil {
		p.cfg.ReachabilityChanged()
	}
	return changed
}

// recordHealth counts a check's answer; p.mu is held.
func (p *Source) recordHealth(ctx context.Context, err error) bool {
	reachable, message := p.failures < p.cfg.FailureThreshold, p.lastError
	if err != nil {
		p.failures++
		p.lastError = err.Error()
		logFailure(ctx, err, message, p.failures, p.cfg.FailureThreshold, "member health check failed")
	} else {
		if !reachable {
			log.G(ctx).Info("the member answers its health checks again")
		}
		p.failures = 0
		p.lastError = ""
	}
	if now := p.failures < p.cfg.FailureThreshold; now != reachable {
		return true
	}
	return !reachable && message != p.lastError
}

// logFailure logs the n-th failure in a row of a check whose failures the
// virtual node shows after threshold of them. The failure that makes the
// node show it is a warning. The ones before are information: one answer
// slowed by a burst is no fault, and the next check may pass. The ones
// after are information when their error differs from the last one
// (previous), and debug otherwise: the node's condition carries the
// latest.
func logFailure(ctx context.Context, err error, previous string, n, threshold int, msg string) {
	e := log.G(ctx).WithError(err).WithField("failures", n)
	switch {
	case n == threshold:
		e.Warn(msg)
	case n < threshold || err.Error() != previous:
		e.Info(msg)
	default:
		e.Debug(msg)
	}
}

// probeKubeletAPI probes the kubelet endpoint once and reports whether that
// changed what the virtual node shows.
func (p *Source) probeKubeletAPI(ctx context.Context) bool {
	timeout := min(p.cfg.KubeletAPIInterval, 10*time.Second)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	err := p.cfg.KubeletAPI.Healthy(cctx)
	cancel()
	if ctx.Err() != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ok, message, first := p.apiFailures < p.cfg.FailureThreshold, p.apiError, !p.apiProbed
	p.apiProbed = true
	if err != nil {
		p.apiFailures++
		p.apiError = err.Error()
		logFailure(ctx, err, message, p.apiFailures, p.cfg.FailureThreshold, "the host apiserver cannot reach the kubelet endpoint")
	} else {
		if !ok {
			log.G(ctx).Info("the host apiserver reaches the kubelet endpoint again")
		}
		p.apiFailures = 0
		p.apiError = ""
	}
	if now := p.apiFailures < p.cfg.FailureThreshold; now != ok || first {
		return true
	}
	return !ok && message != p.apiError
}

func (p *Source) publish(ctx context.Context) {
	p.mu.Lock()
	n := p.buildLocked()
	changed := p.last == nil || !sameNode(p.last, n)
	notify := p.notify
	if changed && notify != nil {
		p.last = n
	}
	p.mu.Unlock()
	if !changed || notify == nil {
		return
	}
	log.G(ctx).WithField("allocatable", n.Status.Allocatable).Debug("virtual node changed")
	notify(n.DeepCopy())
}

// sameNode compares what Build derives, ignoring heartbeat times which change
// on every build.
func sameNode(a, b *corev1.Node) bool {
	if !equality.Semantic.DeepEqual(a.Labels, b.Labels) ||
		!equality.Semantic.DeepEqual(a.Annotations, b.Annotations) ||
		!equality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(a.Status.NodeInfo, b.Status.NodeInfo) ||
		!slices.Equal(a.Status.DeclaredFeatures, b.Status.DeclaredFeatures) ||
		len(a.Status.Conditions) != len(b.Status.Conditions) {
		return false
	}
	for i := range a.Status.Conditions {
		x, y := a.Status.Conditions[i], b.Status.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	return true
}

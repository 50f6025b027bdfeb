package clusternode

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

var _ node.NodeProvider = (*Provider)(nil)

// HealthChecker answers whether the member apiserver is reachable.
type HealthChecker interface {
	Healthy(ctx context.Context) error
}

// ProviderConfig holds what a Provider needs; all fields but Clock are required.
type ProviderConfig struct {
	Node Config
	// Informers is the member's shared informer factory; the provider only
	// registers the node and pod informers on it and never starts it.
	Informers informers.SharedInformerFactory
	Health    HealthChecker
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// HealthInterval is how often the member is checked; FailureThreshold is
	// how many failed checks in a row make the virtual node NotReady.
	HealthInterval   time.Duration
	FailureThreshold int
	// Debounce coalesces bursts of member changes into one recomputation.
	Debounce time.Duration
}

// Provider keeps one virtual node in step with its member: it recomputes the
// node on member node and pod changes and on health transitions, and hands
// the result to virtual-kubelet's node controller when it changed.
type Provider struct {
	cfg   ProviderConfig
	nodes corev1listers.NodeLister
	pods  corev1listers.PodLister

	dirty chan struct{}

	mu        sync.Mutex
	notify    func(*corev1.Node)
	last      *corev1.Node
	failures  int
	lastError string
}

// NewProvider registers the member informers it needs and returns a provider
// whose Run must be called once the informers have started.
func NewProvider(cfg ProviderConfig) (*Provider, error) {
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
	p := &Provider{
		cfg:   cfg,
		nodes: cfg.Informers.Core().V1().Nodes().Lister(),
		pods:  cfg.Informers.Core().V1().Pods().Lister(),
		dirty: make(chan struct{}, 1),
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.markDirty() },
		UpdateFunc: func(old, cur any) { p.markDirty() },
		DeleteFunc: func(any) { p.markDirty() },
	}
	if _, err := cfg.Informers.Core().V1().Nodes().Informer().AddEventHandler(handler); err != nil {
		return nil, err
	}
	if _, err := cfg.Informers.Core().V1().Pods().Informer().AddEventHandler(handler); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Provider) markDirty() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// Ping always succeeds while the host is reachable: the member's health is
// reported through the Ready condition instead, so that the host sees an
// explicit MemberUnreachable reason rather than a silently expiring lease.
func (p *Provider) Ping(ctx context.Context) error { return ctx.Err() }

// NotifyNodeStatus registers the node controller's callback.
func (p *Provider) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) {
	p.mu.Lock()
	p.notify = cb
	p.mu.Unlock()
	p.markDirty()
}

// Node computes the virtual node from the current member state; use it for
// the node's first registration.
func (p *Provider) Node() *corev1.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buildLocked()
}

func (p *Provider) buildLocked() *corev1.Node {
	snap := Snapshot{Reachable: p.failures < p.cfg.FailureThreshold, Message: p.lastError}
	snap.Nodes, _ = p.nodes.List(labels.Everything())
	snap.Pods, _ = p.pods.List(labels.Everything())
	return Build(p.cfg.Node, snap, p.last, p.cfg.Clock.Now())
}

// Run checks the member's health and publishes node changes until ctx ends.
func (p *Provider) Run(ctx context.Context) {
	health := p.cfg.Clock.NewTicker(p.cfg.HealthInterval)
	defer health.Stop()
	p.checkHealth(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-health.C():
			p.checkHealth(ctx)
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

func (p *Provider) checkHealth(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, p.cfg.HealthInterval)
	err := p.cfg.Health.Healthy(cctx)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failures++
		p.lastError = err.Error()
		log.G(ctx).WithError(err).WithField("failures", p.failures).Warn("member health check failed")
		return
	}
	p.failures = 0
	p.lastError = ""
}

func (p *Provider) publish(ctx context.Context) {
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
		!equality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(a.Status.NodeInfo, b.Status.NodeInfo) ||
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

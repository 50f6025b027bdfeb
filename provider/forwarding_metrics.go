// This file measures forwarding: latencies, operations, the backlog of
// pods not forwarded yet, and a span per forwarded operation.

package provider

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podstate"
)

// Metrics are the forwarding measurements of the virtual nodes of one
// process, labelled by node. One Metrics serves every Provider of a process;
// a nil *Metrics measures nothing.
type Metrics struct {
	createLatency *prometheus.HistogramVec
	statusLatency *prometheus.HistogramVec
	operations    *prometheus.CounterVec
	clock         clock.PassiveClock

	// hostSeen holds, by host pod UID, when a host pod not yet forwarded
	// was first seen; statusChanged, by host pod key, when its member pod
	// changed in a way not yet written to the host. Both are bounded by the
	// pods bound to the process's nodes and emptied as pods go.
	hostSeen      sync.Map
	statusChanged sync.Map
}

// latencyBuckets span a quick forward (a few milliseconds) to one stuck
// behind a slow member apiserver (about a minute).
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2, 14)

// NewMetrics registers the forwarding metrics with reg.
func NewMetrics(reg prometheus.Registerer, clk clock.PassiveClock) (*Metrics, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	m := &Metrics{
		createLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_node_forward_create_duration_seconds",
			Help:    "Time from a host pod being seen bound to a virtual node to its member pod being created.",
			Buckets: latencyBuckets,
		}, []string{"node"}),
		statusLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_node_status_sync_duration_seconds",
			Help:    "Time from a member pod changing to the host pod's status being written.",
			Buckets: latencyBuckets,
		}, []string{"node"}),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_node_forward_operations_total",
			Help: "Forwarded pod operations by operation (create, update, delete, status: a member pod change looked at, status-write: a host pod status written) and result (success, error, retry: handed to the forward-retry queue, held: waiting for a missing Secret, ConfigMap or ServiceAccount, conflict: a status write tried again on a newer host pod).",
		}, []string{"node", "operation", "result"}),
		clock: clk,
	}
	for _, c := range []prometheus.Collector{m.createLatency, m.statusLatency, m.operations} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) operation(node, op string, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.operations.WithLabelValues(node, op, result).Inc()
}

// created counts an attempt to forward a pod: held when it waits for a
// missing object rather than having been forwarded.
func (m *Metrics) created(node string, held bool, err error) {
	if m != nil && held {
		m.operations.WithLabelValues(node, "create", "held").Inc()
		return
	}
	m.operation(node, "create", err)
}

// retrying counts a create handed to the forward-retry queue.
func (m *Metrics) retrying(node string) {
	if m != nil {
		m.operations.WithLabelValues(node, "create", "retry").Inc()
	}
}

// statusWrite counts a host pod status write by result.
func (m *Metrics) statusWrite(node, result string) {
	if m != nil {
		m.operations.WithLabelValues(node, "status-write", result).Inc()
	}
}

// hostPodSeen starts the create latency clock of a host pod.
func (m *Metrics) hostPodSeen(pod *corev1.Pod) {
	if m == nil || pod.DeletionTimestamp != nil || podstate.Terminal(pod) {
		return
	}
	m.hostSeen.LoadOrStore(pod.UID, m.clock.Now())
}

// memberPodCreated observes the create latency of a host pod, once.
func (m *Metrics) memberPodCreated(node string, pod *corev1.Pod) {
	if m == nil {
		return
	}
	if seen, ok := m.hostSeen.LoadAndDelete(pod.UID); ok {
		m.createLatency.WithLabelValues(node).Observe(m.clock.Since(seen.(time.Time)).Seconds())
	}
}

func (m *Metrics) hostPodGone(obj any) {
	if pod, ok := podcache.LastState(obj).(*corev1.Pod); ok && m != nil {
		m.hostSeen.Delete(pod.UID)
		m.statusChanged.Delete(pod.Namespace + "/" + pod.Name)
	}
}

// memberPodChanged starts the status latency clock of a host pod, unless
// an earlier change is still waiting to be written.
func (m *Metrics) memberPodChanged(key string) {
	if m != nil {
		m.statusChanged.LoadOrStore(key, m.clock.Now())
	}
}

// statusUnchanged stops the status clock of a pod with nothing to write.
func (m *Metrics) statusUnchanged(key string) {
	if m != nil {
		m.statusChanged.Delete(key)
	}
}

// statusWritten observes the status latency of a host pod.
func (m *Metrics) statusWritten(node, key string) {
	if m == nil {
		return
	}
	if changed, ok := m.statusChanged.LoadAndDelete(key); ok {
		m.statusLatency.WithLabelValues(node).Observe(m.clock.Since(changed.(time.Time)).Seconds())
	}
}

// HostPodEvents returns the handler to add to the informer of the host pods
// bound to this virtual node (the one virtual-kubelet's pod controller
// watches), ahead of the pod controller, so that the create latency counts
// from the moment the host pod is seen.
func (p *Provider) HostPodEvents() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && !p.forwarded(pod) {
				p.cfg.Metrics.hostPodSeen(pod)
			}
		},
		DeleteFunc: p.cfg.Metrics.hostPodGone,
	}
}

// forwarded reports whether the member cache holds the host pod's member pod.
func (p *Provider) forwarded(host *corev1.Pod) bool {
	m, err := p.memberPods.Get(p.target(host.Namespace).Namespace, host.Name)
	return err == nil && p.ours(m) && m.HostUID == host.UID
}

// ForwardedPods counts the member pods this virtual node forwarded.
func (p *Provider) ForwardedPods() int {
	pods, err := p.memberPods.List(p.ownSelector())
	if err != nil {
		return 0
	}
	return len(pods)
}

// Backlog counts the host pods bound to this virtual node that are to run
// but have no member pod yet: those waiting in virtual-kubelet's create
// queue (which keeps its depth to itself) and in the forward-retry queue.
// It looks only at the pods last seen unforwarded (see trackBacklog) and
// drops those that no longer are.
func (p *Provider) Backlog() int {
	n := 0
	p.unforwarded.Range(func(k, _ any) bool {
		ns, name, _ := cache.SplitMetaNamespaceKey(k.(string))
		if h, err := p.hostPods.Pods(ns).Get(name); err == nil && p.inBacklog(h) {
			n++
		} else {
			p.unforwarded.Delete(k)
		}
		return true
	})
	return n
}

// inBacklog reports whether a host pod is to run but has no member pod.
func (p *Provider) inBacklog(h *corev1.Pod) bool {
	return h.DeletionTimestamp == nil && !podstate.Terminal(h) && h.Spec.NodeName == p.cfg.NodeName && !p.forwarded(h)
}

// trackBacklog keeps the keys of the host pods last seen in the backlog:
// each host pod event adds or removes its pod's key. A pod forwarded since
// its last event is dropped by the next Backlog.
func (p *Provider) trackBacklog() cache.ResourceEventHandler {
	seen := func(obj any) {
		if h, ok := obj.(*corev1.Pod); ok {
			if key := h.Namespace + "/" + h.Name; p.inBacklog(h) {
				p.unforwarded.Store(key, struct{}{})
			} else {
				p.unforwarded.Delete(key)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, cur any) { seen(cur) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				p.unforwarded.Delete(key)
			}
		},
	}
}

// measured opens the span of one forwarded operation (see startSpan); the
// returned end closes it with the operation's error and counts the result
// as op: call it deferred, with the address of the named error result.
func (p *Provider) measured(ctx context.Context, name, op, key string) (context.Context, func(*error)) {
	ctx, span := p.startSpan(ctx, name, key)
	return ctx, func(err *error) {
		span.SetStatus(*err)
		span.End()
		p.cfg.Metrics.operation(p.cfg.NodeName, op, *err)
	}
}

// startSpan opens a span around one forwarded operation on the pod key and
// puts the key, with the node, into the span's attributes and the logger's
// fields.
func (p *Provider) startSpan(ctx context.Context, name, key string) (context.Context, trace.Span) {
	ctx, span := trace.StartSpan(ctx, name)
	fields := log.Fields{"pod": key, "node": p.cfg.NodeName}
	ctx = span.WithFields(ctx, fields)
	return log.WithLogger(ctx, log.G(ctx).WithFields(fields)), span
}

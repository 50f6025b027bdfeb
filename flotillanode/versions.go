// This file keeps the virtual nodes' view of the Kubernetes versions of
// their host and member current, and announces a verdict that changes
// with an Event on each virtual node.

package flotillanode

import (
	"context"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"flotilla.io/flotilla/clusternode"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/wellknown"
)

// defaultVersionInterval is how often the versions are read when no link
// went down: an in-place upgrade of a member's apiservers, one at a time
// behind a load balancer, may never break flotilla-node's connections.
const defaultVersionInterval = time.Minute

// versionTimeout bounds one read of a version.
const versionTimeout = 10 * time.Second

// versionWatch reads the host's and the member's Kubernetes versions —
// before the virtual nodes register, every interval, and as soon as a
// link comes back — and gives them to the virtual nodes when they change.
// A version that cannot be read keeps its last value: an unreachable
// cluster has not changed its version for all flotilla-node knows.
type versionWatch struct {
	host, member kube.Interface
	interval     time.Duration
	clock        clock.WithTicker
	// again is signalled when a link came back.
	again chan struct{}

	mu      sync.Mutex
	current clusternode.Versions
	sinks   []func(clusternode.Versions)
}

func newVersionWatch(host, member kube.Interface, interval time.Duration, c clock.WithTicker) *versionWatch {
	if interval <= 0 {
		interval = defaultVersionInterval
	}
	return &versionWatch{host: host, member: member, interval: interval, clock: c, again: make(chan struct{}, 1)}
}

// reconnected asks for the versions to be read again now; for
// kube.Factory.OnReconnect.
func (w *versionWatch) reconnected() {
	select {
	case w.again <- struct{}{}:
	default:
	}
}

// subscribe has sink called with the versions, now and on every change.
func (w *versionWatch) subscribe(sink func(clusternode.Versions)) {
	w.mu.Lock()
	w.sinks = append(w.sinks, sink)
	v := w.current
	w.mu.Unlock()
	sink(v)
}

// read reads both versions once, side by side (one may wait out its
// timeout on a dead link), and hands them on if they changed.
func (w *versionWatch) read(ctx context.Context) {
	var host, member string
	var herr, merr error
	var wg sync.WaitGroup
	wg.Go(func() { host, herr = serverVersion(ctx, w.host) })
	member, merr = serverVersion(ctx, w.member)
	wg.Wait()
	w.mu.Lock()
	v := w.current
	if herr == nil {
		v.Host = host
	}
	if merr == nil {
		v.Member = member
	}
	changed := v != w.current
	w.current = v
	sinks := append([]func(clusternode.Versions){}, w.sinks...)
	w.mu.Unlock()
	if herr != nil {
		log.G(ctx).WithError(herr).Info("cannot read the host's Kubernetes version")
	}
	if merr != nil {
		log.G(ctx).WithError(merr).Info("cannot read the member's Kubernetes version")
	}
	if !changed {
		return
	}
	log.G(ctx).WithField("host", v.Host).WithField("member", v.Member).Info("Kubernetes versions")
	for _, sink := range sinks {
		sink(v)
	}
}

// run reads the versions every interval and when a link comes back,
// until ctx ends.
func (w *versionWatch) run(ctx context.Context) {
	t := w.clock.NewTimer(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-w.again:
		}
		w.read(ctx)
		// Reset drops a due tick a reconnect came before.
		t.Reset(w.interval)
	}
}

// serverVersion is the GitVersion of c's apiserver.
func serverVersion(ctx context.Context, c kube.Interface) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	v, err := c.Discovery().ServerVersionWithContext(ctx)
	if err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

// versionEvents is a virtual node's provider that records an Event on
// the node each time its KubernetesVersionSupported condition changes: a
// Warning when it turns False (or says something new while False), a
// Normal one when it turns True after having been False. The node
// controller publishes only nodes that changed, so a verdict that stays
// is announced once.
type versionEvents struct {
	node.NodeProvider
	recorder record.EventRecorder

	mu   sync.Mutex
	last *corev1.NodeCondition
}

var _ node.NodeProvider = (*versionEvents)(nil)

// NotifyNodeStatus looks at every node published before the node
// controller gets it.
func (v *versionEvents) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	v.NodeProvider.NotifyNodeStatus(ctx, func(n *corev1.Node) {
		v.observe(n)
		cb(n)
	})
}

// observe records the Event a change of n's verdict calls for.
func (v *versionEvents) observe(n *corev1.Node) {
	var c *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == wellknown.NodeKubernetesVersionSupported {
			c = n.Status.Conditions[i].DeepCopy()
		}
	}
	if c == nil {
		return
	}
	v.mu.Lock()
	last := v.last
	v.last = c
	v.mu.Unlock()
	if last != nil && last.Status == c.Status && last.Reason == c.Reason && last.Message == c.Message {
		return
	}
	// As a kubelet refers to its node: kubectl describe node finds the
	// events of the node's name with its name as UID.
	ref := &corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: types.UID(n.Name)}
	switch {
	case c.Status == corev1.ConditionFalse:
		v.recorder.Event(ref, corev1.EventTypeWarning, c.Reason, c.Message)
	case c.Status == corev1.ConditionTrue && last != nil && last.Status == corev1.ConditionFalse:
		v.recorder.Event(ref, corev1.EventTypeNormal, c.Reason, c.Message)
	}
}

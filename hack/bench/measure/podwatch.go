// When each pod of a workload reached each state, through one watch per
// cluster.

package measure

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/podstate"
)

// PodTimes records when the bench first saw a pod in each state.
type PodTimes struct {
	Seen      time.Time // the pod exists
	Scheduled time.Time // spec.nodeName is set
	Ready     time.Time // Running with condition Ready=True
	Unready   time.Time // not Ready any more after having been Ready
	Gone      time.Time // deleted from the apiserver
	Node      string
	Namespace string
}

// Notifier wakes waiters whenever any of the watches sharing it sees a
// change.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced on every change
}

// NewNotifier returns a notifier for watches to share.
func NewNotifier() *Notifier { return &Notifier{ch: make(chan struct{})} }

// changed returns a channel that is closed at the next change.
func (n *Notifier) changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *Notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}

// PodWatch follows the pods of one namespace and label selector in one
// cluster through a single watch (no polling, so it adds no load beyond one
// watch) and records per pod name when it reached each state.
type PodWatch struct {
	cluster  string
	now      func() time.Time
	notifier *Notifier

	mu   sync.Mutex
	pods map[string]*PodTimes
	stop context.CancelFunc
}

// WatchPods starts a podWatch and returns once it has listed the pods that
// exist already. Stop it when done. Watches that share n can be waited on
// together as podWatches.
func WatchPods(ctx context.Context, c kubernetes.Interface, cluster, namespace, selector string, n *Notifier, now func() time.Time) (*PodWatch, error) {
	w := &PodWatch{cluster: cluster, now: now, notifier: n, pods: map[string]*PodTimes{}}
	lw := cache.NewFilteredListWatchFromClient(c.CoreV1().RESTClient(), "pods", namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = selector
	})
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.observe(obj, false) },
			UpdateFunc: func(_, obj any) { w.observe(obj, false) },
			DeleteFunc: func(obj any) { w.observe(obj, true) },
		},
		Transform: func(obj any) (any, error) {
			if m, err := meta.Accessor(obj); err == nil {
				m.SetManagedFields(nil)
			}
			return obj, nil
		},
	})
	wctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	go ctrl.RunWithContext(wctx)
	if !cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
		cancel()
		return nil, fmt.Errorf("watch pods %s in %s/%s: %w", selector, cluster, namespace, ctx.Err())
	}
	return w, nil
}

// Stop ends the watch.
func (w *PodWatch) Stop() { w.stop() }

func (w *PodWatch) observe(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := w.now()
	defer w.notifier.notify()
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.pods[pod.Name]
	if t == nil {
		t = &PodTimes{Seen: now, Namespace: pod.Namespace}
		w.pods[pod.Name] = t
	}
	if deleted {
		if t.Gone.IsZero() {
			t.Gone = now
		}
	} else {
		if pod.Spec.NodeName != "" && t.Scheduled.IsZero() {
			t.Scheduled, t.Node = now, pod.Spec.NodeName
		}
		ready := runningReady(pod)
		if ready && t.Ready.IsZero() {
			t.Ready = now
		}
		if !ready && !t.Ready.IsZero() && t.Unready.IsZero() {
			t.Unready = now
		}
	}
}

// runningReady is what "the pod is up" means to a user: phase Running and
// condition Ready=True.
func runningReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podstate.Ready(p)
}

// PodWatches are watches sharing one notifier, typically of the same
// workload in several member clusters; pod names are unique across them.
type PodWatches []*PodWatch

// Stop ends every watch.
func (ws PodWatches) Stop() {
	for _, w := range ws {
		w.Stop()
	}
}

// count returns how many pods satisfy f.
func (ws PodWatches) count(f func(*PodTimes) bool) int {
	n := 0
	for _, w := range ws {
		w.mu.Lock()
		for _, t := range w.pods {
			if f(t) {
				n++
			}
		}
		w.mu.Unlock()
	}
	return n
}

// Times returns field of every pod that has it set, by pod name.
func (ws PodWatches) Times(field func(*PodTimes) time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for _, w := range ws {
		w.mu.Lock()
		for name, t := range w.pods {
			if v := field(t); !v.IsZero() {
				out[name] = v
			}
		}
		w.mu.Unlock()
	}
	return out
}

// Latest returns the latest value of field over all pods, zero if none has it.
func (ws PodWatches) Latest(field func(*PodTimes) time.Time) time.Time {
	var last time.Time
	for _, t := range ws.Times(field) {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// Pods returns a copy of what the watches recorded, by pod name.
func (ws PodWatches) Pods() map[string]PodTimes {
	out := map[string]PodTimes{}
	for _, w := range ws {
		w.mu.Lock()
		for name, t := range w.pods {
			out[name] = *t
		}
		w.mu.Unlock()
	}
	return out
}

// Find returns the index of the watch that saw the pod called name and
// what it recorded, or -1.
func (ws PodWatches) Find(name string) (int, PodTimes) {
	for i, w := range ws {
		w.mu.Lock()
		t, ok := w.pods[name]
		var c PodTimes
		if ok {
			c = *t
		}
		w.mu.Unlock()
		if ok {
			return i, c
		}
	}
	return -1, PodTimes{}
}

// Nodes returns how many pods were scheduled to each node.
func (ws PodWatches) Nodes() map[string]int {
	out := map[string]int{}
	for _, w := range ws {
		w.mu.Lock()
		for _, t := range w.pods {
			if t.Node != "" {
				out[t.Node]++
			}
		}
		w.mu.Unlock()
	}
	return out
}

// WaitCount waits until at least n pods satisfy f. Every change wakes it,
// so it notices the moment the watches do; the times recorded come from
// the watches anyway.
func (ws PodWatches) WaitCount(ctx context.Context, what string, n int, f func(*PodTimes) bool) error {
	if len(ws) == 0 {
		return nil
	}
	for {
		changed := ws[0].notifier.changed() // before counting, so no change is missed
		got := ws.count(f)
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d pods %s in %s (have %d): %w", n, what, ws.clusters(), got, ctx.Err())
		case <-changed:
		}
	}
}

func (ws PodWatches) clusters() string {
	var names []string
	for _, w := range ws {
		names = append(names, w.cluster)
	}
	return strings.Join(names, ",")
}

// IsSeen reports, for WaitCount, whether the pod exists.
func IsSeen(t *PodTimes) bool { return !t.Seen.IsZero() }

// IsScheduled reports, for WaitCount, whether the pod has a node.
func IsScheduled(t *PodTimes) bool { return !t.Scheduled.IsZero() }

// IsReady reports, for WaitCount, whether the pod has been Running and Ready.
func IsReady(t *PodTimes) bool { return !t.Ready.IsZero() }

// IsUnready reports, for WaitCount, whether the pod stopped being Ready.
func IsUnready(t *PodTimes) bool { return !t.Unready.IsZero() }

// IsGone reports, for WaitCount, whether the pod was deleted.
func IsGone(t *PodTimes) bool { return !t.Gone.IsZero() }

// SeenAt returns, for Times and Latest, when the pod was first seen.
func SeenAt(t *PodTimes) time.Time { return t.Seen }

// ScheduledAt returns, for Times and Latest, when the pod got a node.
func ScheduledAt(t *PodTimes) time.Time { return t.Scheduled }

// ReadyAt returns, for Times and Latest, when the pod was first Ready.
func ReadyAt(t *PodTimes) time.Time { return t.Ready }

// UnreadyAt returns, for Times and Latest, when the pod stopped being Ready.
func UnreadyAt(t *PodTimes) time.Time { return t.Unready }

// GoneAt returns, for Times and Latest, when the pod was deleted.
func GoneAt(t *PodTimes) time.Time { return t.Gone }

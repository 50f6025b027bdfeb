package provider

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/wellknown"
)

// eventMirror reflects the events of forwarded member pods (pulled, started,
// back-off, OOM-killed, FailedScheduling in the member, ...) onto their host
// pods. Each member event is mirrored once per occurrence the member
// reports, so a repeating member event becomes one host event whose count
// grows, not a stream of copies; events older than this process are not
// replayed after a restart.
//
// An event can arrive before the provider's caches show its pod: the
// member's event and pod watches are not ordered, and the host pod cache
// may lag too. Such an event is retried for a while, and counted as
// mirrored only once it was.
type eventMirror struct {
	env         *env
	broadcaster record.EventBroadcaster
	since       time.Time
	events      cache.Store
	queue       workqueue.TypedRateLimitingInterface[string]

	mu        sync.Mutex
	recorders map[string]record.EventRecorder
	mirrored  map[types.UID]int32
}

// eventRetries bounds the retries of an event whose pod the caches do not
// show: the events of pods flotilla did not forward never find one. With
// the queue's backoff they span about half a minute.
const eventRetries = 8

func newEventMirror(e *env, b record.EventBroadcaster) (*eventMirror, error) {
	m := &eventMirror{env: e, broadcaster: b, since: e.cfg.Clock.Now().Add(-time.Second),
		recorders: map[string]record.EventRecorder{}, mirrored: map[types.UID]int32{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "events"}),
	}
	informer := e.cfg.MemberInformers.InformerFor(&corev1.Event{}, func(c kube.Interface) cache.SharedIndexInformer {
		return kube.NewInformer(c, &corev1.Event{}, metav1.NamespaceAll, 0,
			func(o *metav1.ListOptions) { o.FieldSelector = "involvedObject.kind=Pod" }, cache.Indexers{})
	})
	m.events = informer.GetStore()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.observe,
		UpdateFunc: func(_, cur any) { m.observe(cur) },
		DeleteFunc: m.forget,
	})
	return m, err
}

func (m *eventMirror) observe(obj any) {
	e, ok := obj.(*corev1.Event)
	if !ok || eventTime(e).Before(m.since) {
		return
	}
	if key, err := cache.MetaNamespaceKeyFunc(e); err == nil {
		m.queue.Add(key)
	}
}

// run mirrors events until ctx ends.
func (m *eventMirror) run(ctx context.Context) {
	runSynced(ctx, m.queue, nil, 1, m.sync)
}

// sync mirrors one event; one whose host pod is not in the cache yet is
// tried again, a few times.
func (m *eventMirror) sync(_ context.Context, key string) error {
	if m.mirror(key) && m.queue.NumRequeues(key) < eventRetries {
		return errRequeue
	}
	return nil
}

// mirror records the occurrences of an event not mirrored yet on its host
// pod, and reports whether to try again because the pod is not found.
func (m *eventMirror) mirror(key string) (retry bool) {
	obj, ok, _ := m.events.GetByKey(key)
	e, _ := obj.(*corev1.Event)
	if !ok || e == nil {
		return false
	}
	count := max(e.Count, 1)
	if e.Series != nil {
		count = max(count, e.Series.Count)
	}
	m.mu.Lock()
	done := m.mirrored[e.UID] >= count
	m.mu.Unlock()
	if done {
		return false
	}
	host, retry := m.hostPodOf(e.InvolvedObject)
	if host == nil {
		return retry
	}
	component := e.Source.Component
	if component == "" {
		// Recorded through events.k8s.io, as the scheduler does.
		component = e.ReportingController
	}
	m.recorder(component).Event(host, e.Type, e.Reason, e.Message)
	m.mu.Lock()
	m.mirrored[e.UID] = count
	m.mu.Unlock()
	return false
}

func (m *eventMirror) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if e, ok := obj.(*corev1.Event); ok {
		m.mu.Lock()
		delete(m.mirrored, e.UID)
		m.mu.Unlock()
	}
}

// hostPodOf finds the host pod whose member pod the event is about, checking
// UIDs on both sides so an event never lands on a namesake. When it finds
// none, retry says whether a cache may not show the pods yet: the member pod
// is missing, or it is this node's and its host pod is missing.
func (m *eventMirror) hostPodOf(ref corev1.ObjectReference) (host *corev1.Pod, retry bool) {
	member, err := m.env.memberPods.Pods(ref.Namespace).Get(ref.Name)
	if err != nil {
		return nil, true
	}
	if member.UID != ref.UID || !m.env.ours(member) {
		return nil, false
	}
	ns, name := member.Annotations[wellknown.HostNamespaceAnnotation], member.Annotations[wellknown.HostNameAnnotation]
	host, err = m.env.hostPods.Pods(ns).Get(name)
	if err != nil {
		return nil, true
	}
	if string(host.UID) != member.Labels[wellknown.HostUIDLabel] {
		return nil, false
	}
	return host, false
}

// recorder returns a recorder whose events name the member component that
// reported them, with the cluster as their host.
func (m *eventMirror) recorder(component string) record.EventRecorder {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recorders[component]
	if !ok {
		r = m.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component, Host: m.env.cfg.NodeName})
		m.recorders[component] = r
	}
	return r
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

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
	// The informer is the mirror's alone (the partitions of a member share
	// it): it keeps what the mirror reads, in place of the factory's
	// transform. It fails only once the factory started, and then the
	// informer has it already.
	_ = informer.SetTransform(MemberEventTransform)
	m.events = informer.GetStore()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.observe,
		UpdateFunc: func(_, cur any) { m.observe(cur) },
		DeleteFunc: m.forget,
	})
	return m, err
}

func (m *eventMirror) observe(obj any) {
	e := asMemberEvent(obj)
	if e == nil || e.at.Before(m.since) {
		return
	}
	m.queue.Add(cache.ObjectName{Namespace: e.namespace, Name: e.name}.String())
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
	e := asMemberEvent(obj)
	if !ok || e == nil {
		return false
	}
	m.mu.Lock()
	done := m.mirrored[e.uid] >= e.count
	m.mu.Unlock()
	if done {
		return false
	}
	host, retry := m.hostPodOf(e.pod)
	if host == nil {
		return retry
	}
	m.recorder(e.component).Event(host, e.eventType, e.reason, e.message)
	m.mu.Lock()
	m.mirrored[e.uid] = e.count
	m.mu.Unlock()
	return false
}

func (m *eventMirror) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if e := asMemberEvent(obj); e != nil {
		m.mu.Lock()
		delete(m.mirrored, e.uid)
		m.mu.Unlock()
	}
}

// hostPodOf finds the host pod whose member pod the event is about, checking
// UIDs on both sides so an event never lands on a namesake. When it finds
// none, retry says whether a cache may not show the pods yet: the member pod
// is missing, or it is this node's and its host pod is missing.
func (m *eventMirror) hostPodOf(ref podRef) (host *corev1.Pod, retry bool) {
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

// memberEvent is what the mirror keeps of a member event: a cached
// corev1.Event, decoded whole, holds about 1.2 KB, and a member keeps the
// events of each of its pods for an hour (the apiserver's event TTL),
// five or more per pod where a kubelet runs it. It is a cache.Store's
// object (see GetObjectMeta), read-only once made: the partitions of a
// member share it.
type memberEvent struct {
	namespace, name string
	uid             types.UID
	// at is when it last happened, count how often.
	at    time.Time
	count int32
	pod   podRef
	// component reported it.
	component, eventType, reason, message string
}

// podRef names the pod an event is about.
type podRef struct {
	Namespace, Name string
	UID             types.UID
}

// GetObjectMeta makes a memberEvent an object to client-go's stores and
// FIFOs, which read its key (namespace and name) through meta.Accessor.
func (e *memberEvent) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: e.namespace, Name: e.name, UID: e.uid}
}

// MemberEventTransform is the transform of the member event informer: it
// makes each event a memberEvent.
func MemberEventTransform(obj any) (any, error) {
	if e, ok := obj.(*corev1.Event); ok {
		return newMemberEvent(e), nil
	}
	return obj, nil
}

func newMemberEvent(e *corev1.Event) *memberEvent {
	count := max(e.Count, 1)
	if e.Series != nil {
		count = max(count, e.Series.Count)
	}
	component := e.Source.Component
	if component == "" {
		// Recorded through events.k8s.io, as the scheduler does.
		component = e.ReportingController
	}
	ref := e.InvolvedObject
	m := &memberEvent{namespace: e.Namespace, name: e.Name, uid: e.UID, at: eventTime(e), count: count,
		pod:       podRef{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID},
		component: component, eventType: e.Type, reason: e.Reason, message: e.Message}
	for _, s := range []*string{&m.namespace, &m.pod.Namespace, &m.component, &m.eventType, &m.reason} {
		str(s)
	}
	return m
}

// asMemberEvent is obj as the mirror reads it: an informer without
// MemberEventTransform (one started before the mirror) holds events.
func asMemberEvent(obj any) *memberEvent {
	switch e := obj.(type) {
	case *memberEvent:
		return e
	case *corev1.Event:
		return newMemberEvent(e)
	}
	return nil
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

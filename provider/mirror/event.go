package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/provider/internal/keyqueue"
)

// Events reflects the events of forwarded member pods (pulled, started,
// back-off, OOM-killed, FailedScheduling in the member, ...) onto their host
// pods. Each member event becomes one host event, which follows the member
// event's count as it repeats; events older than this process are not
// replayed after a restart.
//
// The mirror writes the host events itself rather than through a
// record.EventRecorder: a recorder's broadcaster holds 1,000 events for its
// one writer and silently drops the rest, which a burst of forwarded pods
// overruns while the host apiserver is busy with the burst. The mirror's
// queue holds every event key until it is written.
//
// An event can arrive before the provider's caches show its pod: the
// member's event and pod watches are not ordered, and the host pod cache
// may lag too. Such an event is retried for a while, and counted as
// mirrored only once it was.
type Events struct {
	env    *env
	since  time.Time
	events cache.Store
	queue  workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// mirrored is the count each member event, by UID, was last written
	// with.
	mirrored map[types.UID]int32
}

// eventRetries bounds the retries of an event whose pod the caches do not
// show (the events of pods flotilla did not forward never find one), or
// whose host write fails. With the queue's backoff they span about half a
// minute.
const eventRetries = 8

// eventWorkers write host events in parallel: each write waits for the host
// apiserver, which a burst of pods keeps busy.
const eventWorkers = 4

func newEvents(e *env) (*Events, error) {
	m := &Events{env: e, since: e.cfg.Clock.Now().Add(-time.Second),
		mirrored: map[types.UID]int32{},
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

func (m *Events) observe(obj any) {
	e := asMemberEvent(obj)
	if e == nil || e.at.Before(m.since) {
		return
	}
	m.queue.Add(cache.ObjectName{Namespace: e.namespace, Name: e.name}.String())
}

// Run mirrors events until ctx ends.
func (m *Events) Run(ctx context.Context) {
	keyqueue.RunSynced(ctx, m.queue, nil, eventWorkers, m.sync)
}

// sync mirrors one event. One whose host pod is not in the cache yet, or
// whose write failed, is tried again a few times.
func (m *Events) sync(ctx context.Context, key string) error {
	err := m.mirror(ctx, key)
	if err == nil || m.queue.NumRequeues(key) < eventRetries {
		return err
	}
	if !errors.Is(err, keyqueue.ErrRequeue) {
		log.G(ctx).WithError(err).WithField("event", key).Warn("member event not mirrored onto its host pod")
	}
	return nil
}

// mirror writes the occurrences of an event not mirrored yet onto its host
// pod. It returns keyqueue.ErrRequeue when the pod is not found yet.
func (m *Events) mirror(ctx context.Context, key string) error {
	obj, ok, _ := m.events.GetByKey(key)
	e := asMemberEvent(obj)
	if !ok || e == nil {
		return nil
	}
	m.mu.Lock()
	written := m.mirrored[e.uid]
	m.mu.Unlock()
	if written >= e.count {
		return nil
	}
	host, retry := m.hostPodOf(e.pod)
	if host == nil {
		if retry {
			return keyqueue.ErrRequeue
		}
		return nil
	}
	switch err := m.write(ctx, host, e, written > 0); {
	case apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The host pod's namespace is gone or going, and its pod with it.
		return nil
	case apierrors.IsInvalid(err):
		log.G(ctx).WithError(err).WithField("event", key).Warn("member event not mirrored onto its host pod")
		return nil
	case err != nil:
		return err
	}
	m.mu.Lock()
	m.mirrored[e.uid] = e.count
	m.mu.Unlock()
	return nil
}

// write creates the host event of e on host, or, when it was written
// before (by this process, or by one before it, whose writes the
// deterministic name finds), brings its count and message up to date.
// NotFound means the host pod's namespace is gone.
func (m *Events) write(ctx context.Context, host *corev1.Pod, e *memberEvent, existed bool) error {
	c := m.env.cfg.HostClient
	name := HostEventName(host.Name, e.uid)
	now := metav1.NewTime(m.env.cfg.Clock.Now())
	update := func() error {
		patch, err := json.Marshal(eventUpdate{Count: e.count, LastTimestamp: now, Message: e.message})
		if err != nil {
			return err
		}
		return kube.PatchEvent(ctx, c, host.Namespace, name, patch)
	}
	if existed {
		// Gone when the host's event TTL passed, or someone deleted it: it
		// is made again.
		if err := update(); !apierrors.IsNotFound(err) {
			return err
		}
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: host.Namespace, Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: host.Namespace, Name: host.Name,
			UID: host.UID, ResourceVersion: host.ResourceVersion},
		Reason: e.reason, Message: e.message, Type: e.eventType, Count: e.count,
		Source:         corev1.EventSource{Component: e.component, Host: m.env.cfg.NodeName},
		FirstTimestamp: now, LastTimestamp: now,
		ReportingController: e.component, ReportingInstance: m.env.cfg.NodeName,
	}
	err := kube.CreateEvent(ctx, c, ev)
	if apierrors.IsAlreadyExists(err) {
		return update()
	}
	return err
}

// eventUpdate is what a repeat of a member event changes in its host event.
type eventUpdate struct {
	Count         int32       `json:"count"`
	LastTimestamp metav1.Time `json:"lastTimestamp"`
	Message       string      `json:"message"`
}

// HostEventName names the host event of the member event uid on the host
// pod: the same name from any process, so that a write is never doubled.
func HostEventName(pod string, uid types.UID) string {
	h := fnv.New64a()
	h.Write([]byte(uid))
	return fmt.Sprintf("%s.%016x", pod, h.Sum64())
}

func (m *Events) forget(obj any) {
	if e := asMemberEvent(podcache.LastState(obj)); e != nil {
		m.mu.Lock()
		delete(m.mirrored, e.uid)
		m.mu.Unlock()
	}
}

// hostPodOf finds the host pod whose member pod the event is about, checking
// UIDs on both sides so an event never lands on a namesake. When it finds
// none, retry says whether a cache may not show the pods yet: the member pod
// is missing, or it is this node's and its host pod is missing.
func (m *Events) hostPodOf(ref podRef) (host *corev1.Pod, retry bool) {
	member, err := m.env.memberPods.Get(ref.Namespace, ref.Name)
	if err != nil {
		return nil, true
	}
	if member.UID != ref.UID || !m.env.ours(member) {
		return nil, false
	}
	ns, name := podcache.HostKeyOf(member)
	host, err = m.env.hostPods.Pods(ns).Get(name)
	if err != nil {
		return nil, true
	}
	if host.UID != member.HostUID {
		return nil, false
	}
	return host, false
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
		podcache.InternString(s)
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

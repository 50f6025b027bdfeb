// This file tests the mirror of member pod events onto host pods.

package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/kube/kubetest"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podcache/podcachetest"
	"flotilla.io/flotilla/provider/translate"
)

// scheduledEvent is the event a member's scheduler records on the i-th pod
// of a burst, as the apiserver serves it.
func scheduledEvent(i int) *corev1.Event {
	now := metav1.NewTime(time.Date(2026, 11, 26, 9, 0, i/50, 0, time.UTC))
	pod := fmt.Sprintf("burst-0-6d5f8b7c9-%05d", i)
	return &corev1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("%s.18%014x", pod, i),
			UID: types.UID(fmt.Sprintf("1b2c3d4e-5f60-4a7b-8c9d-%012d", i)), ResourceVersion: fmt.Sprint(200000 + i), CreationTimestamp: now},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: pod, APIVersion: "v1",
			UID: types.UID(fmt.Sprintf("7e6d5c4b-3a29-4180-9f8e-%012d", i)), ResourceVersion: fmt.Sprint(100000 + i)},
		Reason: "Scheduled", Message: fmt.Sprintf("Successfully assigned bench/%s to kwok-node-%d", pod, i%3),
		Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "default-scheduler"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1, ReportingController: "default-scheduler", ReportingInstance: "default-scheduler-control-plane",
	}
}

// TestMemberEventTransform: the member event informer keeps of each event
// what the mirror reads, under the event's own key, and the transform can
// run again on what it made.
func TestMemberEventTransform(t *testing.T) {
	e := scheduledEvent(7)
	e.Source.Component = "" // recorded through events.k8s.io
	e.Series = &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(e.LastTimestamp.Add(time.Minute))}
	obj, err := MemberEventTransform(e)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := obj.(*memberEvent)
	if !ok {
		t.Fatalf("transformed to %T", obj)
	}
	want := memberEvent{namespace: "bench", name: e.Name, uid: e.UID, at: e.Series.LastObservedTime.Time, count: 4,
		pod:       podRef{Namespace: "bench", Name: e.InvolvedObject.Name, UID: e.InvolvedObject.UID},
		component: "default-scheduler", eventType: corev1.EventTypeNormal, reason: "Scheduled", message: e.Message}
	if *m != want {
		t.Errorf("kept %+v, want %+v", *m, want)
	}
	if again, _ := MemberEventTransform(m); again != m {
		t.Error("the transform changed what it made")
	}
	store := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
	if err := store.Add(m); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := store.GetByKey("bench/" + e.Name); !ok || got != m {
		t.Errorf("not found under its key: %v", store.ListKeys())
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(cache.DeletedFinalStateUnknown{Key: "bench/" + e.Name, Obj: m})
	if err != nil || key != "bench/"+e.Name {
		t.Errorf("tombstone key %q, %v", key, err)
	}
	if got := asMemberEvent(scheduledEvent(7)); got == nil || got.count != 1 || got.component != "default-scheduler" {
		t.Errorf("an event read as %+v", got)
	}
}

// BenchmarkCachedEventBytes reports what the member event cache holds for
// each forwarded pod's Scheduled event: decoded as a watch delivers it,
// and as MemberEventTransform keeps it.
func BenchmarkCachedEventBytes(b *testing.B) {
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	const n = 2000
	wire := make([][]byte, n)
	for i := range wire {
		data, err := kruntime.Encode(codec, scheduledEvent(i))
		if err != nil {
			b.Fatal(err)
		}
		wire[i] = data
	}
	var decoded, kept float64
	for b.Loop() {
		decoded, kept = podcachetest.HeldDecoded(b, wire, podcache.StripManagedFields), podcachetest.HeldDecoded(b, wire, MemberEventTransform)
	}
	b.ReportMetric(decoded, "decoded-B/event")
	b.ReportMetric(kept, "kept-B/event")
}

// mirrorWorld is a world whose caches show n forwarded pods, burst-0..,
// each with a member pod, and whose mirror runs alone: the tests below
// drive it as the member event informer would.
func mirrorWorld(t *testing.T, n int) *world {
	t.Helper()
	w := newWorld(t)
	target := w.cfg.Target(testNamespace)
	for i := range n {
		host := boundPod(fmt.Sprintf("burst-%d", i))
		member := translate.ToMember(host, target)
		member.UID = types.UID(fmt.Sprintf("member-uid-%d", i))
		must(t, w.hostPodIndexer.Add(host))
		must(t, w.memberPodIndexer.Add(member))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.m.Events.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	w.ctx = ctx
	return w
}

// memberEventOn is the i-th member pod's Scheduled event, as the member's
// scheduler records it, count times so far.
func memberEventOn(i int, count int32) *corev1.Event {
	now := metav1.Now()
	pod := fmt.Sprintf("burst-%d", i)
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: fmt.Sprintf("%s.%x", pod, i),
			UID: types.UID(fmt.Sprintf("event-uid-%d", i))},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: testNamespace, Name: pod, APIVersion: "v1",
			UID: types.UID(fmt.Sprintf("member-uid-%d", i))},
		Reason: "Scheduled", Message: fmt.Sprintf("Successfully assigned %s/%s to node-1 (%d)", testNamespace, pod, count),
		Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "default-scheduler"},
		FirstTimestamp: now, LastTimestamp: now, Count: count,
	}
}

// memberReports is the member event informer seeing e.
func (w *world) memberReports(e *corev1.Event) {
	w.t.Helper()
	obj, err := MemberEventTransform(e)
	must(w.t, err)
	must(w.t, w.m.Events.events.Update(obj))
	w.m.Events.observe(obj)
}

// mirroredEvents lists the host events the mirror wrote, by name.
func (w *world) mirroredEvents() map[string]corev1.Event {
	w.t.Helper()
	l, err := w.host.CoreV1().Events(testNamespace).List(context.Background(), metav1.ListOptions{})
	must(w.t, err)
	got := map[string]corev1.Event{}
	for _, e := range l.Items {
		if e.Source.Component == "default-scheduler" {
			got[e.Name] = e
		}
	}
	return got
}

// TestMemberEventsOutlastASlowHost: a burst of member events while the
// host apiserver is too busy to take any event loses none. The host
// events are held until the member has reported all of them, more than
// client-go's event broadcaster queues; then each pod gets its one event.
func TestMemberEventsOutlastASlowHost(t *testing.T) {
	const n = 2500
	w := mirrorWorld(t, n)
	release := make(chan struct{})
	// The host keeps the events itself: the fake's tracker takes a
	// millisecond for each.
	var mu sync.Mutex
	got := map[string]*corev1.Event{}
	kubetest.PrependReactor(&w.host.Fake, "create", "events", func(a ktesting.Action) (bool, kruntime.Object, error) {
		<-release
		e := a.(ktesting.CreateAction).GetObject().(*corev1.Event)
		mu.Lock()
		defer mu.Unlock()
		if got[e.Name] != nil {
			return true, nil, apierrors.NewAlreadyExists(corev1.Resource("events"), e.Name)
		}
		got[e.Name] = e
		return true, e, nil
	})
	written := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	for i := range n {
		w.memberReports(memberEventOn(i, 1))
	}
	close(release)
	w.eventually("every event written", func() bool { return written() >= n })
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		pod := fmt.Sprintf("burst-%d", i)
		e, ok := got[HostEventName(pod, types.UID(fmt.Sprintf("event-uid-%d", i)))]
		if !ok || e.InvolvedObject.Name != pod || e.InvolvedObject.UID != types.UID("uid-"+pod) || e.Count != 1 ||
			e.Reason != "Scheduled" || e.Source.Host != testNode || e.ReportingController != "default-scheduler" {
			t.Fatalf("pod %s: host event %+v", pod, e)
		}
	}
	if len(got) != n {
		t.Errorf("%d host events, want %d", len(got), n)
	}
}

// TestRepeatedMemberEvent: a member event that repeats is one host event
// whose count follows the member's, also across a restart of the mirror
// and after the host event expired.
func TestRepeatedMemberEvent(t *testing.T) {
	w := mirrorWorld(t, 1)
	name := HostEventName("burst-0", "event-uid-0")
	count := func() int32 { return w.mirroredEvents()[name].Count }
	w.memberReports(memberEventOn(0, 1))
	w.eventually("first occurrence", func() bool { return count() == 1 })
	w.memberReports(memberEventOn(0, 3))
	w.eventually("count follows the member", func() bool { return count() == 3 })
	if e := w.mirroredEvents(); len(e) != 1 || e[name].Message != memberEventOn(0, 3).Message {
		t.Fatalf("host events %+v", e)
	}

	// A new process knows nothing of what the last one wrote.
	w.m.Events.mu.Lock()
	clear(w.m.Events.mirrored)
	w.m.Events.mu.Unlock()
	w.memberReports(memberEventOn(0, 4))
	w.eventually("count after a restart", func() bool { return count() == 4 })

	must(t, w.host.CoreV1().Events(testNamespace).Delete(w.ctx, name, metav1.DeleteOptions{}))
	w.memberReports(memberEventOn(0, 5))
	w.eventually("written again once expired", func() bool { return count() == 5 })
	if e := w.mirroredEvents(); len(e) != 1 {
		t.Fatalf("host events %+v", e)
	}
}

// TestMemberEventInAGoingNamespace: an event whose host namespace is being
// deleted is dropped, not retried: its pod goes with the namespace.
func TestMemberEventInAGoingNamespace(t *testing.T) {
	w := mirrorWorld(t, 1)
	var creates atomic.Int32
	kubetest.PrependReactor(&w.host.Fake, "create", "events", func(ktesting.Action) (bool, kruntime.Object, error) {
		creates.Add(1)
		err := apierrors.NewForbidden(corev1.Resource("events"), "", errors.New("namespace app is being terminated"))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
		return true, nil, err
	})
	w.memberReports(memberEventOn(0, 1))
	w.eventually("event tried", func() bool { return creates.Load() == 1 })
	w.never("event tried again", 300*time.Millisecond, func() bool { return creates.Load() > 1 })
}

package provider

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
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
		decoded, kept = heldDecoded(b, wire, StripManagedFields), heldDecoded(b, wire, MemberEventTransform)
	}
	b.ReportMetric(decoded, "decoded-B/event")
	b.ReportMetric(kept, "kept-B/event")
}

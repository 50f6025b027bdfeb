// Tests of pod watches.

package measure

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/go-cmp/cmp"
)

func TestPodWatchObserve(t *testing.T) {
	clock := time.Unix(1000, 0)
	now := func() time.Time { return clock }
	w := &PodWatch{cluster: "c", now: now, notifier: NewNotifier(), pods: map[string]*PodTimes{}}
	ws := PodWatches{w}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	step := func(d time.Duration, mutate func(*corev1.Pod), deleted bool) {
		clock = clock.Add(d)
		mutate(pod)
		w.observe(pod.DeepCopy(), deleted)
	}
	step(0, func(*corev1.Pod) {}, false)
	step(time.Second, func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, false)
	step(time.Second, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, false) // Running, not yet Ready
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	step(time.Second, func(p *corev1.Pod) { p.Status.Conditions = []corev1.PodCondition{ready} }, false)
	step(time.Second, func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }, false)
	step(time.Second, func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionTrue }, false)
	step(time.Second, func(*corev1.Pod) {}, true)

	t0 := time.Unix(1000, 0)
	_, got := ws.Find("p")
	want := PodTimes{
		Seen: t0, Scheduled: t0.Add(time.Second), Ready: t0.Add(3 * time.Second),
		Unready: t0.Add(4 * time.Second), Gone: t0.Add(6 * time.Second), Node: "n1", Namespace: "ns",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("times (-want +got):\n%s", diff)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := ws.WaitCount(ctx, "gone", 1, IsGone); err != nil {
		t.Errorf("waitCount for a pod already gone: %v", err)
	}
	if err := ws.WaitCount(ctx, "seen", 2, IsSeen); err == nil {
		t.Error("waitCount for 2 pods of 1: want a timeout")
	}
	if diff := cmp.Diff(map[string]int{"n1": 1}, ws.Nodes()); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

func TestPodWatchesWakeOnChange(t *testing.T) {
	n := NewNotifier()
	a := &PodWatch{cluster: "a", now: time.Now, notifier: n, pods: map[string]*PodTimes{}}
	b := &PodWatch{cluster: "b", now: time.Now, notifier: n, pods: map[string]*PodTimes{}}
	ws := PodWatches{a, b}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- ws.WaitCount(ctx, "seen", 2, IsSeen)
	}()
	a.observe(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, false)
	b.observe(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "y"}}, false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

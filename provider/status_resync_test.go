// This file tests the periodic pass that sets right what no event shows.

package provider

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/provider/translate"
)

// TestQueueWrongStatuses: the periodic pass queues the host pods whose
// status is not what their member pods say, those whose deletion waits
// for a member pod already gone, and the member pods whose host pod is
// gone; not the pods that are right, nor those not forwarded yet.
func TestQueueWrongStatuses(t *testing.T) {
	w := buildHarness(t)
	ctx := context.Background()
	target := w.p.target(testNamespace)
	forwarded := func(name string, hostStatus func(*corev1.PodStatus)) {
		host := boundPod(name)
		member := translate.ToMember(host, target)
		member.Status = runningStatus()
		host.Status = translate.HostStatus(host, &member.Status)
		if hostStatus != nil {
			hostStatus(&host.Status)
		}
		must(t, w.hostPodIndexer.Add(host))
		must(t, w.memberPodIndexer.Add(member))
	}
	forwarded("right", nil)
	forwarded("marked-not-ready", func(s *corev1.PodStatus) {
		for i := range s.Conditions {
			if s.Conditions[i].Type == corev1.PodReady {
				s.Conditions[i].Status = corev1.ConditionFalse
			}
		}
	})
	must(t, w.hostPodIndexer.Add(boundPod("not-forwarded-yet")))
	must(t, w.hostPodIndexer.Add(boundPod("deleted", func(p *corev1.Pod) {
		p.DeletionTimestamp = ptr.To(metav1.Now())
		p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	})))
	orphan := translate.ToMember(boundPod("evicted"), target)
	must(t, w.memberPodIndexer.Add(orphan))

	if n := w.p.queueWrongStatuses(); n != 3 {
		t.Errorf("queued %d pods, want 3", n)
	}
	queued := map[string]bool{}
	for w.p.statusQueue.Len() > 0 {
		key, _ := w.p.statusQueue.Get()
		queued[key] = true
		w.p.statusQueue.Done(key)
	}
	for _, want := range []string{"marked-not-ready", "deleted", "evicted"} {
		if !queued[testNamespace+"/"+want] {
			t.Errorf("%s not queued; queued %v", want, queued)
		}
	}

	// The sync sets the NotReady pod right from its member pod.
	must(t, w.p.syncStatus(ctx, testNamespace+"/marked-not-ready"))
	w.p.hostStatus.mu.Lock()
	want := w.p.hostStatus.pending[testNamespace+"/marked-not-ready"]
	w.p.hostStatus.mu.Unlock()
	if want == nil || !podstate.Ready(&corev1.Pod{Status: want.status}) {
		t.Errorf("status to write onto the pod marked NotReady: %+v, want Ready", want)
	}
}

// BenchmarkQueueWrongStatuses measures the periodic pass over a node of
// 1,000 forwarded pods whose statuses are all right, its usual case.
func BenchmarkQueueWrongStatuses(b *testing.B) {
	w := buildHarness(b)
	target := w.p.target(testNamespace)
	for i := range 1000 {
		host := boundPod("p-" + strconv.Itoa(i))
		member := translate.ToMember(host, target)
		member.Status = runningStatus()
		host.Status = translate.HostStatus(host, &member.Status)
		if err := w.hostPodIndexer.Add(host); err != nil {
			b.Fatal(err)
		}
		if err := w.memberPodIndexer.Add(member); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := w.p.queueWrongStatuses(); n != 0 {
			b.Fatalf("queued %d pods whose status is right", n)
		}
	}
}

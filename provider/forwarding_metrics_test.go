// This file tests the backlog of pods not forwarded yet.

package provider

import (
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
)

// TestBacklogFromCandidates: the backlog counts the host pods that are to
// run but have no member pod, without walking every host pod of the node
// at each scrape.
func TestBacklogFromCandidates(t *testing.T) {
	var listed atomic.Int64
	w := newHarness(t, func(c *harnessConfig) {
		c.hostPods = func(i corev1informers.PodInformer) corev1informers.PodInformer {
			return countingPods{PodInformer: i, listed: &listed}
		}
	})
	for i := range 20 {
		w.createHostPod(boundPod(fmt.Sprintf("web-%d", i)))
	}
	w.createHostPod(secretVolumePod("held", "db"))
	done := boundPod("done")
	done.Status.Phase = corev1.PodSucceeded
	w.createHostPod(done)
	w.eventually("pods forwarded", func() bool { return w.p.ForwardedPods() == 20 })
	w.eventually("backlog of the held pod", func() bool { return w.p.Backlog() == 1 })
	listed.Store(0)
	if n := w.p.Backlog(); n != 1 {
		t.Errorf("backlog %d, want 1", n)
	}
	if n := listed.Load(); n != 0 {
		t.Errorf("listed %d host pods to count a backlog of one", n)
	}
	if err := w.host.CoreV1().Pods(testNamespace).Delete(w.ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("backlog forgotten", func() bool { return syncMapLen(&w.p.unforwarded) == 0 })
}

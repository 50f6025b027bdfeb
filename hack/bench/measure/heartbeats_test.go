// Tests of heartbeat windows and waiting for usable nodes.

package measure

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/google/go-cmp/cmp"
)

func lease(name string, at time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: at}}}
}

func readyNode(name string, ready bool, taints ...string) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionUnknown
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test"}}}}
	for _, k := range taints {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
	}
	return n
}

func TestHeartbeatStats(t *testing.T) {
	t0 := time.Unix(10000, 0)
	clock := t0
	h := newHeartbeats([]string{"a", "b"}, func() time.Time { return clock })
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	h.observeNode(readyNode("a", true), false)
	h.observeNode(readyNode("b", false), false)
	h.observeNode(readyNode("other", false), false) // not followed
	clock = at(5 * time.Second)
	h.observeNode(readyNode("b", true), false)
	// a renews every 10 s; b every 10 s but misses one (a 20 s gap).
	for _, s := range []int{0, 10, 20, 30, 40, 50, 60} {
		h.observeLease(lease("a", at(time.Duration(s)*time.Second)))
	}
	h.observeLease(lease("a", at(60*time.Second))) // an update that is not a renewal
	for _, s := range []int{2, 12, 32, 42, 52} {
		h.observeLease(lease("b", at(time.Duration(s)*time.Second)))
	}
	h.observeLease(lease("other", at(time.Second)))
	// a is lost for 8 s: tainted, then Ready again.
	clock = at(44 * time.Second)
	h.observeNode(readyNode("a", true, corev1.TaintNodeUnreachable), false)
	clock = at(52 * time.Second)
	h.observeNode(readyNode("a", true), false)

	got := h.Stats(at(10*time.Second), at(60*time.Second), 15*time.Second)
	want := HeartbeatStats{
		Renewals: 5 + 4, MinRenewals: 4, MaxGap: 20 * time.Second, Late: 1,
		Lost: 1, Unusable: 8 * time.Second, Why: []string{"a at " + at(44*time.Second).Format("15:04:05.000") + ": tainted " + corev1.TaintNodeUnreachable},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}

	// Before b was first Ready it was unusable, but it never lost Ready.
	early := h.Stats(t0.Add(-time.Second), at(10*time.Second), 15*time.Second)
	if early.Lost != 0 || early.Unusable != 5*time.Second {
		t.Errorf("early window: lost %d, unusable %s; want 0, 5s", early.Lost, early.Unusable)
	}
	// A lease that stops renewing shows as a growing gap to the window's end.
	late := h.Stats(at(50*time.Second), at(90*time.Second), 15*time.Second)
	if late.MaxGap != 38*time.Second || late.Late != 2 {
		t.Errorf("late window: max gap %s, late %d; want 38s, 2", late.MaxGap, late.Late)
	}
	// A lease never renewed in the window counts as unrenewed.
	none := h.Stats(at(61*time.Second), at(70*time.Second), 15*time.Second)
	if none.Unrenewed != 2 || none.MinRenewals != 0 {
		t.Errorf("empty window: unrenewed %d, fewest %d; want 2, 0", none.Unrenewed, none.MinRenewals)
	}

	clock = at(100 * time.Second)
	h.observeNode(readyNode("b", true), true)
	gone := h.Stats(at(90*time.Second), at(110*time.Second), 15*time.Second)
	if gone.Lost != 1 || gone.Unusable != 10*time.Second {
		t.Errorf("deleted node: lost %d, unusable %s; want 1, 10s", gone.Lost, gone.Unusable)
	}
}

func TestHeartbeatsWaitUsable(t *testing.T) {
	t0 := time.Unix(10000, 0)
	clock := t0
	h := newHeartbeats([]string{"a", "b"}, func() time.Time { return clock })
	h.observeNode(readyNode("a", true), false)
	done := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		last, err := h.WaitUsable(ctx, []string{"a", "b"}, t0.Add(-time.Second))
		if err != nil {
			t.Error(err)
		}
		done <- last
	}()
	clock = t0.Add(3 * time.Second)
	h.observeNode(readyNode("b", true), false)
	if last := <-done; !last.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("last Ready at %s, want %s", last, t0.Add(3*time.Second))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	h.observeNode(readyNode("a", false), false)
	if _, err := h.WaitUsable(ctx, []string{"a"}, t0); err == nil {
		t.Error("want a timeout while a is not Ready")
	}
}

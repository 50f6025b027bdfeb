package policyctl

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/propagation"
)

// byRank is a cost that falls as the rank grows, whatever the cluster.
func byRank(_ string, rank int32) int32 { return -rank }

// to picks cluster whatever the counts.
func to(cluster string) func(map[string]int32) string {
	return func(map[string]int32) string { return cluster }
}

func TestLedger(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Unix(1e9, 0))
	l := newLedger(clock)
	l.reserve("tpl", "a", liveView{}, to("beijing"), byRank)
	l.reserve("tpl", "b", liveView{}, to("beijing"), byRank)
	l.reserve("tpl", "c", liveView{}, to("hangzhou"), byRank)
	l.reserve("other", "d", liveView{}, to("hangzhou"), byRank)

	// The cache shows pod a: it counts once, as a live pod.
	got := l.counts("tpl", liveView{counts: map[string]int32{"beijing": 1}, seen: map[string]bool{"a": true}})
	if diff := cmp.Diff(map[string]int32{"beijing": 2, "hangzhou": 1}, got); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	// Assignments whose pods never appear are forgotten after ledgerTTL.
	clock.SetTime(clock.Now().Add(ledgerTTL + time.Second))
	if got := l.counts("tpl", liveView{}); len(got) != 0 {
		t.Errorf("counts after the TTL = %v, want none", got)
	}
	if _, ok := l.pending["tpl"]; ok {
		t.Error("an expired template's entries are kept")
	}
}

// TestBurstOverTwoReplicas checks what docs/policies.md promises of HA:
// one webhook replica splits a burst exactly; over two replicas, each
// ledger knows only its own assignments, so a burst the Service spreads
// before their caches show its pods may miss the targets by at most one pod
// per cluster for the other replica, and convergence then brings every
// cluster to its target.
func TestBurstOverTwoReplicas(t *testing.T) {
	d := propagation.Decision{Mode: policyv1alpha1.ReplicaSchedulingTypeDivided, Targets: []propagation.Target{
		{Cluster: "beijing", Replicas: 3}, {Cluster: "hangzhou", Replicas: 3}}}
	want := map[string]int32{"beijing": 3, "hangzhou": 3}
	clock := clocktesting.NewFakePassiveClock(time.Unix(1e9, 0))
	burst := func(replicas int) map[string]int32 {
		ledgers := make([]*ledger, replicas)
		for i := range ledgers {
			ledgers[i] = newLedger(clock)
		}
		got := map[string]int32{}
		for i := range 6 {
			l := ledgers[i%replicas] // the Service alternates; no cache shows the pods yet
			c, _ := l.reserve("tpl", strconv.Itoa(i), liveView{}, func(counts map[string]int32) string { return propagation.Next(d, counts) }, byRank)
			got[c]++
		}
		return got
	}
	if diff := cmp.Diff(want, burst(1)); diff != "" {
		t.Errorf("one replica (-want +got):\n%s", diff)
	}
	split := burst(2)
	for c, n := range want {
		if miss := split[c] - n; miss > 1 || miss < -1 {
			t.Errorf("two replicas put %d pods in %s, want %d±1 (split %v)", split[c], c, n, split)
		}
	}

	// Convergence: evict what nextMove picks, let the controller recreate
	// it and the webhook (whose cache now shows every pod) place it, until
	// nothing moves.
	var pods []*corev1.Pod
	for c, n := range split {
		for i := range int(n) {
			pods = append(pods, runningPod(c+strconv.Itoa(i), c, true, -i, i))
		}
	}
	moves := 0
	for m := nextMove(d, 6, pods); m != nil; m = nextMove(d, 6, pods) {
		if moves++; moves > 6 {
			t.Fatalf("convergence does not end: %d moves", moves)
		}
		pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return p == m.pod })
		counts := map[string]int32{}
		for _, p := range pods {
			counts[clusterOf(p)]++
		}
		to := propagation.Next(d, counts)
		pods = append(pods, runningPod(fmt.Sprintf("new%d", moves), to, true, 0, 100+moves))
	}
	got := map[string]int32{}
	for _, p := range pods {
		got[clusterOf(p)]++
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after convergence (-want +got):\n%s", diff)
	}
	if maxMoves := int(max(split["beijing"]-3, split["hangzhou"]-3)); moves != maxMoves {
		t.Errorf("convergence took %d evictions, want %d (one per surplus pod)", moves, maxMoves)
	}
}

// TestReserveIsOneStep: an admission that has counted but not yet recorded
// its pick must not let a concurrent one count without it, or both see the
// same counts, pick the same cluster and give their pods the same rank.
func TestReserveIsOneStep(t *testing.T) {
	l := newLedger(clocktesting.NewFakePassiveClock(time.Unix(1e9, 0)))
	aPicking, releaseA := make(chan struct{}), make(chan struct{})
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		l.reserve("tpl", "a", liveView{}, func(map[string]int32) string {
			close(aPicking)
			<-releaseA
			return "beijing"
		}, byRank)
	}()
	<-aPicking
	bSaw := make(chan map[string]int32, 1)
	go func() {
		l.reserve("tpl", "b", liveView{}, func(counts map[string]int32) string {
			bSaw <- maps.Clone(counts)
			return "beijing"
		}, byRank)
	}()
	select {
	case counts := <-bSaw:
		t.Fatalf("a second admission counted (%v) while the first was still picking", counts)
	case <-time.After(time.Second): // ample for b to get there if it could
	}
	close(releaseA)
	<-aDone
	if counts := <-bSaw; counts["beijing"] != 1 {
		t.Errorf("the second admission counted %v, want the first one's pick in beijing", counts)
	}
}

// TestLedgerForgetsPodsThatCameAndWent: a burst's last pods are deleted (a
// scale-down) before the template's next admission looks at the ledger;
// once the cache showed them they no longer count, so a scale-up right
// after gets each cluster's next ranks rather than ranks past the gone pods.
func TestLedgerForgetsPodsThatCameAndWent(t *testing.T) {
	l := newLedger(clocktesting.NewFakePassiveClock(time.Unix(1e9, 0)))
	if _, cost := l.reserve("tpl", "a", liveView{}, to("beijing"), byRank); cost != -1 {
		t.Fatalf("first rank's cost = %d, want -1", cost)
	}
	l.reserve("tpl", "b", liveView{}, to("beijing"), byRank)
	l.arrived("tpl", "a")
	l.arrived("tpl", "b")
	// Scaled down to pod a alone, then up by one.
	a := liveView{counts: map[string]int32{"beijing": 1}, seen: map[string]bool{"a": true}, costs: map[string]map[int32]bool{"beijing": {-1: true}}, epoch: l.epoch()}
	if _, cost := l.reserve("tpl", "c", a, to("beijing"), byRank); cost != -2 {
		t.Errorf("cost after pod b came and went = %d, want rank 2's, -2", cost)
	}
	l.arrived("other", "c") // another template's pod does not drop it
	if got := l.counts("tpl", liveView{}); got["beijing"] != 1 {
		t.Errorf("counts = %v, want c alone pending", got)
	}
}

// TestLedgerCountsPodsArrivingDuringAnAdmission: an admission lists the
// cache, and pod a, admitted just before, appears in the cache only after
// that list but before the admission reserves. The admission's view does
// not show a, so the ledger must still count it: otherwise the second pod
// of a burst takes a's cluster slot and a's pod-deletion-cost, and a later
// scale-down deletes the wrong cluster's pod (flotilla-policy then evicts
// to restore the split, moving a replica).
func TestLedgerCountsPodsArrivingDuringAnAdmission(t *testing.T) {
	l := newLedger(clocktesting.NewFakePassiveClock(time.Unix(1e9, 0)))
	l.reserve("tpl", "a", liveView{epoch: l.epoch()}, to("hangzhou"), byRank)
	before := liveView{counts: map[string]int32{}, seen: map[string]bool{}, costs: map[string]map[int32]bool{}, epoch: l.epoch()}
	l.arrived("tpl", "a")
	if _, cost := l.reserve("tpl", "b", before, to("hangzhou"), byRank); cost != -2 {
		t.Errorf("cost of the pod after a = %d, want rank 2's, -2 (a holds -1)", cost)
	}
	// A view listed after a arrived shows it, or a has gone: the ledger
	// no longer counts a, only b, which has not arrived.
	after := liveView{counts: map[string]int32{"hangzhou": 1}, seen: map[string]bool{"a": true}, costs: map[string]map[int32]bool{"hangzhou": {-1: true}}, epoch: l.epoch()}
	if got := l.counts("tpl", after); got["hangzhou"] != 2 {
		t.Errorf("counts = %v, want hangzhou 2 (a live, b pending)", got)
	}
	gone := liveView{epoch: l.epoch()}
	if got := l.counts("tpl", gone); got["hangzhou"] != 1 {
		t.Errorf("counts once a came and went = %v, want hangzhou 1 (b pending)", got)
	}
}

// TestReserveFillsGaps: a cluster's pods hold ranks 1, 2 and 4 (rank 3 was
// evicted, or deleted by hand): the replacement gets rank 3's cost, not a
// second rank 4, and the one after it rank 5, so a scale-down still finds
// distinct costs in the decision's order.
func TestReserveFillsGaps(t *testing.T) {
	l := newLedger(clocktesting.NewFakePassiveClock(time.Unix(1e9, 0)))
	live := liveView{counts: map[string]int32{"beijing": 3}, seen: map[string]bool{}, costs: map[string]map[int32]bool{"beijing": {-1: true, -2: true, -4: true}}}
	if _, cost := l.reserve("tpl", "a", live, to("beijing"), byRank); cost != -3 {
		t.Errorf("replacement's cost = %d, want the missing rank 3's, -3", cost)
	}
	if _, cost := l.reserve("tpl", "b", live, to("beijing"), byRank); cost != -5 {
		t.Errorf("next cost = %d, want rank 5's, -5", cost)
	}
	if _, cost := l.reserve("tpl", "c", live, to("hangzhou"), byRank); cost != -1 {
		t.Errorf("another cluster's first cost = %d, want -1", cost)
	}
}

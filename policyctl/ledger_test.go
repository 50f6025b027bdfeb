package policyctl

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/propagation"
)

func TestLedger(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Unix(1e9, 0))
	l := newLedger(clock)
	l.add("tpl", "a", "beijing")
	l.add("tpl", "b", "beijing")
	l.add("tpl", "c", "hangzhou")
	l.add("other", "d", "hangzhou")

	// The cache shows pod a: it counts once, as a live pod.
	got := l.counts("tpl", map[string]int32{"beijing": 1}, map[string]bool{"a": true})
	if diff := cmp.Diff(map[string]int32{"beijing": 2, "hangzhou": 1}, got); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	// Assignments whose pods never appear are forgotten after ledgerTTL.
	clock.SetTime(clock.Now().Add(ledgerTTL + time.Second))
	if got := l.counts("tpl", nil, nil); len(got) != 0 {
		t.Errorf("counts after the TTL = %v, want none", got)
	}
	if _, ok := l.pending["tpl"]; ok {
		t.Error("an expired template's entries are kept")
	}
}

// TestBurstOverTwoReplicas shows what docs/policies.md says of HA: each
// replica's ledger only knows its own assignments, so a burst the Service
// spreads over two replicas before their caches show its pods can miss the
// targets (3/3 becomes 4/2), and convergence then moves one replica back.
func TestBurstOverTwoReplicas(t *testing.T) {
	d := propagation.Decision{Mode: policyv1alpha1.ReplicaSchedulingTypeDivided, Targets: []propagation.Target{
		{Cluster: "beijing", Replicas: 3}, {Cluster: "hangzhou", Replicas: 3}}}
	clock := clocktesting.NewFakePassiveClock(time.Unix(1e9, 0))
	burst := func(replicas int) map[string]int32 {
		ledgers := make([]*ledger, replicas)
		for i := range ledgers {
			ledgers[i] = newLedger(clock)
		}
		got := map[string]int32{}
		for i := range 6 {
			l := ledgers[i%replicas] // the Service alternates; no cache shows the pods yet
			c := propagation.Next(d, l.counts("tpl", nil, nil))
			l.add("tpl", strconv.Itoa(i), c)
			got[c]++
		}
		return got
	}
	if diff := cmp.Diff(map[string]int32{"beijing": 3, "hangzhou": 3}, burst(1)); diff != "" {
		t.Errorf("one replica (-want +got):\n%s", diff)
	}
	split := burst(2)
	if diff := cmp.Diff(map[string]int32{"beijing": 4, "hangzhou": 2}, split); diff != "" {
		t.Errorf("two replicas (-want +got):\n%s", diff)
	}
	var pods []*corev1.Pod
	for c, n := range split {
		for i := range int(n) {
			pods = append(pods, runningPod(c+strconv.Itoa(i), c, true, -i, i))
		}
	}
	if m := nextMove(d, 6, pods); m == nil || clusterOf(m.pod) != "beijing" {
		t.Errorf("convergence after the burst moves %+v, want a pod out of beijing", m)
	}
}

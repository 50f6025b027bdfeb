package policyctl

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
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

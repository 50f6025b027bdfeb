// Tests of the meter's per-pod report.

package measure

import "testing"

// TestReportCountsClosedWatches reports the watches an apiserver closed
// for falling behind per 1,000 pods, and not as requests.
func TestReportCountsClosedWatches(t *testing.T) {
	m := &Meter{requests: map[string]RequestCounts{
		RoleHost: {"POST pods": 100, "WATCH pods": 6, "WATCH-TERMINATED pods": 5, "WATCH-TERMINATED leases.coordination.k8s.io": 1},
	}}
	s := Sample{}
	m.Report(s, 100)
	if got := s["api.host.watches_terminated_per_1000_pods"]; got != 60 {
		t.Errorf("closed watches per 1000 pods = %v, want 60", got)
	}
	if got := s["api.host.writes_per_pod"]; got != 1 {
		t.Errorf("writes per pod = %v, want 1", got)
	}
	if got := s["api.host.reads_per_pod"]; got != 0 {
		t.Errorf("reads per pod = %v, want 0", got)
	}
}

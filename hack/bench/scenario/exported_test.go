// Tests of what the exported scenario computes from its readings.

package scenario

import (
	"math"
	"testing"

	"flotilla.io/flotilla/hack/bench/measure"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestRoundRobin(t *testing.T) {
	groups := [][]string{{"a2", "a1", "a3"}, {"b1"}, nil, {"c2", "c1"}}
	tests := map[string]struct {
		n    int
		want []string
	}{
		"one from each member in turn": {4, []string{"a1", "b1", "c1", "a2"}},
		"a member runs out":            {6, []string{"a1", "b1", "c1", "a2", "c2", "a3"}},
		"more than there are":          {10, []string{"a1", "b1", "c1", "a2", "c2", "a3"}},
		"none":                         {0, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, roundRobin(groups, tc.n)); diff != "" {
				t.Errorf("roundRobin (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExportReading(t *testing.T) {
	r := exportReading{
		host: "host", members: []string{"m1", "m2"}, changes: 20,
		native:   map[string]float64{"host": 20, "m1": 10, "m2": 10},
		exported: map[string]float64{"host": 40, "m1": 40, "m2": 60},
	}
	s := measure.Sample{}
	r.add(s)
	p := measure.ExportedPrefix
	want := measure.Sample{
		p + "changes":                         20,
		p + "native_host_writes_per_change":   1,
		p + "native_member_writes_per_change": 1,
		p + "host_writes_per_change":          2,
		p + "broker_writes_per_change":        1,
		p + "member_writes_per_change":        5,
		p + "member_export_writes_per_change": 4,
		p + "member.m1.writes_per_change":     2,
		p + "member.m2.writes_per_change":     3,
		p + "total_writes_per_change":         7,
		p + "writes_over_native":              7,
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("sample (-want +got):\n%s", diff)
	}

	// Without a baseline there is no ratio to report.
	r.native = map[string]float64{}
	s = measure.Sample{}
	r.add(s)
	if v := s[p+"writes_over_native"]; !math.IsInf(v, 1) {
		t.Errorf("writes_over_native without a baseline = %v, want +Inf", v)
	}
	if _, ok := s.Clean()[p+"writes_over_native"]; ok {
		t.Error("a ratio without a baseline survives Clean")
	}
}

func TestAddRSS(t *testing.T) {
	s := measure.Sample{}
	addRSS(s,
		map[string]float64{"m1": 40, "m2": 41, policyKey: 60},
		map[string]float64{"m1": 43, "m2": 42.5, policyKey: 64})
	p := measure.ExportedPrefix
	want := measure.Sample{
		p + "node.m1.rss_before_mib": 40, p + "node.m1.rss_after_mib": 43, p + "node.m1.rss_added_mib": 3,
		p + "node.m2.rss_before_mib": 41, p + "node.m2.rss_after_mib": 42.5, p + "node.m2.rss_added_mib": 1.5,
		p + "policy_rss_before_mib": 60, p + "policy_rss_after_mib": 64, p + "policy_rss_added_mib": 4,
		p + "node_rss_added_mib": 3,
	}
	if diff := cmp.Diff(want, s, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("sample (-want +got):\n%s", diff)
	}

	// A process that shrank adds a negative amount, not zero.
	s = measure.Sample{}
	addRSS(s, map[string]float64{"m1": 40}, map[string]float64{"m1": 39})
	if got := s[p+"node_rss_added_mib"]; got != -1 {
		t.Errorf("node_rss_added_mib = %v, want -1", got)
	}
}

func TestExportedOptions(t *testing.T) {
	if _, err := options(func(o *Options) { o.Scenarios = "exported"; o.ExportedFlips = 0 }); err == nil {
		t.Error("--exported-flips 0 accepted")
	}
	if _, err := options(func(o *Options) { o.Scenarios = "exported"; o.ExportedPods, o.ExportedFlips = 10, 11 }); err == nil {
		t.Error("more --exported-flips than --exported-pods accepted")
	}
	o, err := options(func(o *Options) { o.Scenarios = "exported" })
	if err != nil {
		t.Fatal(err)
	}
	if got := peakPods(o); got != 1000 {
		t.Errorf("peakPods = %d, want 1000", got)
	}
}

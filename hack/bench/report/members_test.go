// Tests of the members scenario's figures and tables.

package report

import (
	"bytes"
	"strings"
	"testing"

	"flotilla.io/flotilla/hack/bench/measure"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestMembersFinish(t *testing.T) {
	r := &measure.MembersResult{Members: 20, NodesPerCluster: 3, Replicas: 1000,
		Idle: measure.Sample{"members.idle_host_api_requests_per_s_added_per_member": 0.42},
		Native: &measure.ModeResult{Runs: []measure.Sample{
			{"burst.ready_s": 10, "cpu.total_per_1000_pods_s": 50, "spread.host-node-1": 16, "spread.host-node-2": 17},
			{"burst.ready_s": 12, "cpu.total_per_1000_pods_s": 60},
			{"burst.ready_s": 11, "cpu.total_per_1000_pods_s": 55},
		}},
		Flotilla: &measure.ModeResult{Runs: []measure.Sample{
			{"burst.ready_s": 19, "cpu.total_per_1000_pods_s": 110, "cpu.member/kube-apiserver_s": 30, "cpu.member/etcd_s": 5,
				"cpu.host/kube-apiserver_s": 9, "spread.member-1": 50, "spread.member-2": 49},
			{"burst.ready_s": 17, "cpu.total_per_1000_pods_s": 100},
			{"burst.ready_s": 18, "cpu.total_per_1000_pods_s": 90},
		}},
	}
	finishMembers(r)
	if diff := cmp.Diff(map[string]float64{"burst.ready_s": 18.0 / 11, "cpu.total_per_1000_pods_s": 100.0 / 55}, r.Ratios, cmp.Comparer(approx)); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
	wantTargets := map[string]measure.TargetCheck{
		"idle_host_api_requests_per_s_added_per_member": {Value: 0.42, Limit: 0.5, Met: true},
		"burst_ready_ratio_vs_native":                   {Value: 18.0 / 11, Limit: 1.6, Met: false},
	}
	if diff := cmp.Diff(wantTargets, r.Targets, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	first := r.Flotilla.Runs[0]
	if first["members.member_cpu_s"] != 35 || first["members.host_side_cpu_s"] != 9 || first["members.pods_per_node_min"] != 49 || first["members.pods_per_node_max"] != 50 {
		t.Errorf("derived burst figures = %v", first)
	}

	var out bytes.Buffer
	printMembers(r, &out)
	for _, want := range []string{
		"20 members with 3 kwok nodes each (native: a host with 60), bursts of 1000 pods, median of 3 runs",
		"runs of burst.ready_s: native 10.00, 12.00, 11.00; flotilla 19.00, 17.00, 18.00",
		"target: 20 members: idle host apiserver requests/s added per member 0.420 ≤ 0.5: met",
		"target: 20 members: burst ratio (all pods Ready) vs native with the same node count 1.636 ≤ 1.6: MISSED",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	printMembersMarkdown(r, &out)
	if want := "| burst: all pods Running+Ready (s) | 11.00 | 18.00 | 1.64 |"; !strings.Contains(out.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, out.String())
	}
}

func TestDetailRates(t *testing.T) {
	s := measure.Sample{"d.PUT leases": 0.1, "d.GET nodes": -0.3, "d.PATCH nodes/status": 0.2, "other": 9}
	if got, want := detailRates(s, "d"), "GET nodes -0.300, PATCH nodes/status 0.200, PUT leases 0.100"; got != want {
		t.Errorf("detailRates = %q, want %q", got, want)
	}
	if got := detailRates(s, "none"); got != "none" {
		t.Errorf("detailRates with nothing = %q", got)
	}
}

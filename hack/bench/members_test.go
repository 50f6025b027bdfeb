package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDeriveIdle(t *testing.T) {
	// Two members: without flotilla-node the host serves 1 write and 2
	// reads a second; with them 3 writes and 4 reads.
	without := idleReading{elapsed: 10, host: requestCounts{"PUT leases": 10, "GET (non-resource)": 20}}
	with := idleReading{elapsed: 20,
		host:     requestCounts{"PUT leases": 40, "PATCH nodes/status": 20, "GET (non-resource)": 40, "GET nodes": 40},
		nodeReqs: requestCounts{"host PUT leases": 30, "host PATCH nodes/status": 20, "member GET (non-resource)": 8},
		nodeCPU:  map[string]float64{"member-1": 0.2, "member-2": 0.6},
		nodeRSS:  map[string]float64{"member-1": 40, "member-2": 50},
	}
	w := idleWatches{
		hostWithout: watchCounts{"pods": 3, "nodes": 2},
		hostWith:    watchCounts{"pods": 5, "nodes": 4, "leases.coordination.k8s.io": 2},
		// Each member's apiserver gains 9 watches.
		memberWithout: map[string]float64{"member-1": 10, "member-2": 12},
		memberWith:    map[string]float64{"member-1": 19, "member-2": 21},
	}
	s := sample{}
	deriveIdle(s, 2, without, with, w)
	want := sample{
		"members.idle_host_api_requests_per_s_without":          3,
		"members.idle_host_api_requests_per_s_with":             7,
		"members.idle_host_api_requests_per_s_added_per_member": 2,
		"members.idle_host_api_writes_per_s_without":            1,
		"members.idle_host_api_writes_per_s_with":               3,
		"members.idle_host_api_writes_per_s_added_per_member":   1,
		"members.idle_host_api_reads_per_s_without":             2,
		"members.idle_host_api_reads_per_s_with":                4,
		"members.idle_host_api_reads_per_s_added_per_member":    1,
		// PUT leases 1/s → 2/s, PATCH 0 → 1/s, GET nodes 0 → 2/s; the
		// non-resource GETs stay at 2/s.
		"members_detail.idle_host_added_per_member_per_s.PUT leases":                   0.5,
		"members_detail.idle_host_added_per_member_per_s.PATCH nodes/status":           0.5,
		"members_detail.idle_host_added_per_member_per_s.GET nodes":                    1,
		"members_detail.idle_host_without_per_s.PUT leases":                            1,
		"members_detail.idle_host_without_per_s.GET (non-resource)":                    2,
		"members_detail.idle_host_with_per_s.PUT leases":                               2,
		"members_detail.idle_host_with_per_s.PATCH nodes/status":                       1,
		"members_detail.idle_host_with_per_s.GET (non-resource)":                       2,
		"members_detail.idle_host_with_per_s.GET nodes":                                2,
		"members_detail.idle_node_host_requests_per_member_per_s.PUT leases":           0.75,
		"members_detail.idle_node_host_requests_per_member_per_s.PATCH nodes/status":   0.5,
		"members_detail.idle_node_member_requests_per_member_per_s.GET (non-resource)": 0.2,
		"members.idle_node_host_requests_per_member_per_s":                             1.25,
		"members.host_watches_without":                                                 5,
		"members.host_watches_with":                                                    11,
		"members.host_watches_added_per_member":                                        3,
		"members_detail.host_watches_added_per_member.pods":                            1,
		"members_detail.host_watches_added_per_member.nodes":                           1,
		"members_detail.host_watches_added_per_member.leases.coordination.k8s.io":      1,
		"members.member_watches_added_per_member":                                      9,
		// 0.2 and 0.6 CPU-s over 20 s.
		"members.idle_node_millicores_sum":  40,
		"members.idle_node_millicores_mean": 20,
		"members.idle_node_millicores_max":  30,
		"members.idle_node_rss_mib_sum":     90,
		"members.idle_node_rss_mib_mean":    45,
		"members.idle_node_rss_mib_max":     50,
	}
	if diff := cmp.Diff(want, s, cmp.Comparer(approx)); diff != "" {
		t.Errorf("deriveIdle (-want +got):\n%s", diff)
	}
}

func TestDropScrape(t *testing.T) {
	rc := requestCounts{requestKey("GET", "", "metrics"): 3, requestKey("GET", "", "api"): 2, "GET pods": 1}
	dropScrape(rc)
	want := requestCounts{requestKey("GET", "", "metrics"): 2, requestKey("GET", "", "api"): 2, "GET pods": 1}
	if diff := cmp.Diff(want, rc); diff != "" {
		t.Errorf("dropScrape (-want +got):\n%s", diff)
	}
	only := requestCounts{requestKey("GET", "", "metrics"): 1}
	dropScrape(only)
	if len(only) != 0 {
		t.Errorf("dropScrape of the one scrape left %v", only)
	}
}

func TestAddBurstRates(t *testing.T) {
	s := sample{}
	addBurstRates(s, requestCounts{"POST pods": 100, "GET pods": 40, "WATCH pods": 2, "LIST pods": 58}, 20*time.Second)
	want := sample{
		"members.burst_host_api_requests_per_s": 10,
		"members.burst_host_api_writes_per_s":   5,
		"members.burst_host_api_reads_per_s":    4.9,
		"members.burst_measured_s":              20,
	}
	if diff := cmp.Diff(want, s, cmp.Comparer(approx)); diff != "" {
		t.Errorf("addBurstRates (-want +got):\n%s", diff)
	}
	empty := sample{}
	addBurstRates(empty, requestCounts{"POST pods": 1}, 0)
	if len(empty) != 0 {
		t.Errorf("no measured phase: got %v, want nothing", empty)
	}
}

func TestMembersFinish(t *testing.T) {
	r := &membersResult{Members: 20, NodesPerCluster: 3, Replicas: 1000,
		Idle: sample{"members.idle_host_api_requests_per_s_added_per_member": 0.42},
		Native: &modeResult{Runs: []sample{
			{"burst.ready_s": 10, "cpu.total_per_1000_pods_s": 50, "spread.host-node-1": 16, "spread.host-node-2": 17},
			{"burst.ready_s": 12, "cpu.total_per_1000_pods_s": 60},
			{"burst.ready_s": 11, "cpu.total_per_1000_pods_s": 55},
		}},
		Flotilla: &modeResult{Runs: []sample{
			{"burst.ready_s": 19, "cpu.total_per_1000_pods_s": 110, "cpu.member/kube-apiserver_s": 30, "cpu.member/etcd_s": 5,
				"cpu.host/kube-apiserver_s": 9, "spread.member-1": 50, "spread.member-2": 49},
			{"burst.ready_s": 17, "cpu.total_per_1000_pods_s": 100},
			{"burst.ready_s": 18, "cpu.total_per_1000_pods_s": 90},
		}},
	}
	r.finish()
	if diff := cmp.Diff(map[string]float64{"burst.ready_s": 18.0 / 11, "cpu.total_per_1000_pods_s": 100.0 / 55}, r.Ratios, cmp.Comparer(approx)); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
	wantTargets := map[string]targetCheck{
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
	r.printTable(&out)
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
	r.printMarkdown(&out)
	if want := "| burst: all pods Running+Ready (s) | 11.00 | 18.00 | 1.64 |"; !strings.Contains(out.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, out.String())
	}
}

func TestDetailRates(t *testing.T) {
	s := sample{"d.PUT leases": 0.1, "d.GET nodes": -0.3, "d.PATCH nodes/status": 0.2, "other": 9}
	if got, want := detailRates(s, "d"), "GET nodes -0.300, PATCH nodes/status 0.200, PUT leases 0.100"; got != want {
		t.Errorf("detailRates = %q, want %q", got, want)
	}
	if got := detailRates(s, "none"); got != "none" {
		t.Errorf("detailRates with nothing = %q", got)
	}
}

func TestMemInfoGiB(t *testing.T) {
	meminfo := []byte("MemTotal:       25165824 kB\nMemFree:        1048576 kB\nMemAvailable:   12582912 kB\n")
	if got := memInfoGiB(meminfo, "MemAvailable"); got != 12 {
		t.Errorf("MemAvailable = %v GiB, want 12", got)
	}
	if got := memInfoGiB(meminfo, "MemTotal"); got != 24 {
		t.Errorf("MemTotal = %v GiB, want 24", got)
	}
	if got := memInfoGiB(meminfo, "SwapTotal"); got != 0 {
		t.Errorf("a missing field = %v, want 0", got)
	}
}

func TestMembersOptions(t *testing.T) {
	o, err := parseFlags([]string{"--scenarios=members", "--members-count=7", "--replicas=300"})
	if err != nil {
		t.Fatal(err)
	}
	mo := membersOptions(o)
	if mo.members != 7 || peakPods(mo) != 300 || o.members != 3 {
		t.Errorf("membersOptions: members %d, peak pods %d (options' members %d)", mo.members, peakPods(mo), o.members)
	}
	if _, err := parseFlags([]string{"--members-count=0"}); err == nil {
		t.Error("--members-count=0: want an error")
	}
}

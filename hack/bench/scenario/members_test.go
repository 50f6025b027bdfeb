// Tests of the members scenario's idle and burst figures.

package scenario

import (
	"math"
	"testing"
	"time"

	"flotilla.io/flotilla/hack/bench/measure"
	"github.com/google/go-cmp/cmp"
)

func TestDeriveIdle(t *testing.T) {
	// Two members: without flotilla-node the host serves 1 write and 2
	// reads a second; with them 3 writes and 4 reads.
	without := idleReading{elapsed: 10, host: measure.RequestCounts{"PUT leases": 10, "GET (non-resource)": 20}}
	with := idleReading{elapsed: 20,
		host:     measure.RequestCounts{"PUT leases": 40, "PATCH nodes/status": 20, "GET (non-resource)": 40, "GET nodes": 40},
		nodeReqs: measure.RequestCounts{"host PUT leases": 30, "host PATCH nodes/status": 20, "member GET (non-resource)": 8},
		nodeCPU:  map[string]float64{"member-1": 0.2, "member-2": 0.6},
		nodeRSS:  map[string]float64{"member-1": 40, "member-2": 50},
	}
	w := idleWatches{
		hostWithout: measure.WatchCounts{"pods": 3, "nodes": 2},
		hostWith:    measure.WatchCounts{"pods": 5, "nodes": 4, "leases.coordination.k8s.io": 2},
		// Each member's apiserver gains 9 watches.
		memberWithout: map[string]float64{"member-1": 10, "member-2": 12},
		memberWith:    map[string]float64{"member-1": 19, "member-2": 21},
	}
	s := measure.Sample{}
	deriveIdle(s, 2, without, with, w)
	want := measure.Sample{
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
	rc := measure.RequestCounts{measure.RequestKey("GET", "", "metrics"): 3, measure.RequestKey("GET", "", "api"): 2, "GET pods": 1}
	dropScrape(rc)
	want := measure.RequestCounts{measure.RequestKey("GET", "", "metrics"): 2, measure.RequestKey("GET", "", "api"): 2, "GET pods": 1}
	if diff := cmp.Diff(want, rc); diff != "" {
		t.Errorf("dropScrape (-want +got):\n%s", diff)
	}
	only := measure.RequestCounts{measure.RequestKey("GET", "", "metrics"): 1}
	dropScrape(only)
	if len(only) != 0 {
		t.Errorf("dropScrape of the one scrape left %v", only)
	}
}

func TestAddBurstRates(t *testing.T) {
	s := measure.Sample{}
	addBurstRates(s, measure.RequestCounts{"POST pods": 100, "GET pods": 40, "WATCH pods": 2, "LIST pods": 58}, 20*time.Second)
	want := measure.Sample{
		"members.burst_host_api_requests_per_s": 10,
		"members.burst_host_api_writes_per_s":   5,
		"members.burst_host_api_reads_per_s":    4.9,
		"members.burst_measured_s":              20,
	}
	if diff := cmp.Diff(want, s, cmp.Comparer(approx)); diff != "" {
		t.Errorf("addBurstRates (-want +got):\n%s", diff)
	}
	empty := measure.Sample{}
	addBurstRates(empty, measure.RequestCounts{"POST pods": 1}, 0)
	if len(empty) != 0 {
		t.Errorf("no measured phase: got %v, want nothing", empty)
	}
}

func TestMembersOptions(t *testing.T) {
	o, err := options(func(o *Options) { o.Scenarios, o.MembersCount, o.Replicas = "members", 7, 300 })
	if err != nil {
		t.Fatal(err)
	}
	mo := membersOptions(o)
	if mo.Members != 7 || peakPods(mo) != 300 || o.Members != 3 {
		t.Errorf("membersOptions: members %d, peak pods %d (options' members %d)", mo.Members, peakPods(mo), o.Members)
	}
	if _, err := options(func(o *Options) { o.MembersCount = 0 }); err == nil {
		t.Error("--members-count=0: want an error")
	}
}

// approx is equality up to rounding.
func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

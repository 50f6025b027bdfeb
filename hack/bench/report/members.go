// The members scenario's figures, targets and tables.

package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"flotilla.io/flotilla/hack/bench/measure"
)

// The figures many members are held to, at 20 members: what a member adds
// to the idle host, and the burst against a single cluster of as many
// nodes.
const (
	targetIdleRequestsPerMember = 0.5
	targetBurstRatio            = 1.6
)

// membersRows are the bursts' metrics printed, native against flotilla;
// those marked ratio have flotilla/native.
var membersRows = []row{
	{"burst: all pods Running+Ready (s)", "burst.ready_s", "%.2f", true},
	{"burst: all pods created (s)", "burst.created_s", "%.2f", true},
	{"burst: all pods scheduled (s)", "burst.scheduled_s", "%.2f", true},
	{"burst: pod startup p50 (s)", "burst.pod_startup_p50_s", "%.2f", true},
	{"burst: pod startup p99 (s)", "burst.pod_startup_p99_s", "%.2f", true},
	{"burst: all member pods Ready (s)", "burst.member_ready_s", "%.2f", false},
	{"burst: status lag member→host p99 (s)", "burst.status_lag_p99_s", "%.3f", false},
	{"burst: pods per node (virtual node), fewest", "members.pods_per_node_min", "%.0f", false},
	{"burst: pods per node (virtual node), most", "members.pods_per_node_max", "%.0f", false},
	{"delete: all pods gone (s)", "delete.gone_s", "%.2f", true},
	{"delete: all member pods gone (s)", "delete.member_gone_s", "%.2f", false},
	{"all processes: CPU-s per 1000 pods", "cpu.total_per_1000_pods_s", "%.1f", true},
	{"host apiserver CPU-s (create + delete)", "cpu.host/kube-apiserver_s", "%.1f", true},
	{"flotilla-nodes CPU-s (create + delete, sum)", "cpu.flotilla-node_s", "%.1f", false},
	{"member processes CPU-s (create + delete, sum)", "members.member_cpu_s", "%.1f", false},
	{"host apiserver requests/s, create + delete phases (each with --settle)", "members.burst_host_api_requests_per_s", "%.1f", true},
	{"host apiserver writes per pod", "api.host.writes_per_pod", "%.2f", true},
	{"host apiserver reads per pod", "api.host.reads_per_pod", "%.2f", true},
	{"flotilla-node peak RSS, largest (MiB)", "footprint.node_peak_rss_mib", "%.1f", false},
	{"flotilla-nodes RSS with the pods, sum (MiB)", "footprint.loaded_node_rss_sum_mib", "%.1f", false},
	{"host processes and flotilla-nodes CPU-s (create + delete)", "members.host_side_cpu_s", "%.1f", true},
	{"world's processes RSS summed, all pods Ready (GiB; shared pages once per process)", "members.world_rss_loaded_gib", "%.2f", true},
	{"machine memory available then (GiB)", "members.mem_available_loaded_gib", "%.1f", false},
	{"flotilla-node error lines (create + delete)", "burst.log_error_lines", "%.0f", false},
	{"flotilla-node warning lines (create + delete)", "burst.log_warning_lines", "%.0f", false},
}

// membersIdleRows are the flotilla world's idle metrics printed.
var membersIdleRows = []row{
	{"world start-up, all clusters Ready (s)", "world.start_s", "%.0f", false},
	{"all virtual nodes Ready after the flotilla-nodes start (s)", "members.nodes_ready_s", "%.1f", false},
	{"host apiserver requests/s idle, no flotilla-node", "members.idle_host_api_requests_per_s_without", "%.2f", false},
	{"host apiserver requests/s idle, all flotilla-nodes Ready", "members.idle_host_api_requests_per_s_with", "%.2f", false},
	{"host apiserver requests/s added per member", "members.idle_host_api_requests_per_s_added_per_member", "%.3f", false},
	{"host apiserver writes/s added per member", "members.idle_host_api_writes_per_s_added_per_member", "%.3f", false},
	{"host apiserver reads/s added per member", "members.idle_host_api_reads_per_s_added_per_member", "%.3f", false},
	{"host requests/s per member, as flotilla-node counts its own", "members.idle_node_host_requests_per_member_per_s", "%.3f", false},
	{"host open watches, no flotilla-node", "members.host_watches_without", "%.0f", false},
	{"host open watches, all flotilla-nodes Ready", "members.host_watches_with", "%.0f", false},
	{"host open watches added per member", "members.host_watches_added_per_member", "%.1f", false},
	{"member open watches added per member (its own apiserver)", "members.member_watches_added_per_member", "%.1f", false},
	{"flotilla-node idle CPU, sum (millicores)", "members.idle_node_millicores_sum", "%.1f", false},
	{"flotilla-node idle CPU, per process mean (millicores)", "members.idle_node_millicores_mean", "%.2f", false},
	{"flotilla-node idle CPU, largest (millicores)", "members.idle_node_millicores_max", "%.2f", false},
	{"flotilla-node idle RSS, sum (MiB)", "members.idle_node_rss_mib_sum", "%.0f", false},
	{"flotilla-node idle RSS, per process mean (MiB)", "members.idle_node_rss_mib_mean", "%.1f", false},
	{"flotilla-node idle RSS, largest (MiB)", "members.idle_node_rss_mib_max", "%.1f", false},
	{"world's processes RSS summed idle (GiB; shared pages once per process)", "members.world_rss_idle_gib", "%.2f", false},
	{"machine memory available then (GiB)", "members.mem_available_idle_gib", "%.1f", false},
}

// finish computes the medians, ratios and targets, and the figures derived
// from a run's sample.
func finishMembers(r *measure.MembersResult) {
	for _, mr := range []*measure.ModeResult{r.Native, r.Flotilla} {
		if mr == nil {
			continue
		}
		for _, s := range mr.Runs {
			deriveBurst(s)
		}
		mr.Median = measure.MedianSample(mr.Runs)
	}
	r.Ratios = map[string]float64{}
	for _, row := range membersRows {
		if !row.ratio {
			continue
		}
		if v := ratio(membersFlotilla(r)[row.key], membersNative(r), row.key); v != 0 {
			r.Ratios[row.key] = v
		}
	}
	r.Targets = map[string]measure.TargetCheck{}
	check := func(name string, v float64, ok bool, limit float64) {
		if ok {
			r.Targets[name] = measure.TargetCheck{Value: v, Limit: limit, Met: v <= limit}
		}
	}
	v, ok := r.Idle["members.idle_host_api_requests_per_s_added_per_member"]
	check("idle_host_api_requests_per_s_added_per_member", v, ok, targetIdleRequestsPerMember)
	v, ok = r.Ratios["burst.ready_s"]
	check("burst_ready_ratio_vs_native", v, ok, targetBurstRatio)
}

// deriveBurst adds what a burst's sample says put together: the member
// processes' CPU seconds, the host's with the flotilla-nodes' (natively,
// the host's with its kwok), and the fewest and most pods any virtual node
// (any node, natively) ran.
func deriveBurst(s measure.Sample) {
	var memberCPU, hostCPU float64
	found, foundHost := false, false
	least, most := math.Inf(1), 0.0
	for k, v := range s {
		if strings.HasPrefix(k, "cpu."+measure.RoleMember+"/") && strings.HasSuffix(k, "_s") {
			memberCPU += v
			found = true
		}
		if (strings.HasPrefix(k, "cpu."+measure.RoleHost+"/") || k == "cpu.flotilla-node_s") && strings.HasSuffix(k, "_s") {
			hostCPU += v
			foundHost = true
		}
		if strings.HasPrefix(k, "spread.") {
			least, most = min(least, v), max(most, v)
		}
	}
	if found {
		s["members.member_cpu_s"] = memberCPU
	}
	if foundHost {
		s["members.host_side_cpu_s"] = hostCPU
	}
	if most > 0 {
		s["members.pods_per_node_min"], s["members.pods_per_node_max"] = least, most
	}
}

func membersNative(r *measure.MembersResult) measure.Sample {
	if r.Native == nil || r.Native.Median == nil {
		return measure.Sample{}
	}
	return r.Native.Median
}

func membersFlotilla(r *measure.MembersResult) measure.Sample {
	if r.Flotilla == nil || r.Flotilla.Median == nil {
		return measure.Sample{}
	}
	return r.Flotilla.Median
}

// runs is the number of runs behind the medians.
func membersRuns(r *measure.MembersResult) int {
	n := 0
	for _, mr := range []*measure.ModeResult{r.Native, r.Flotilla} {
		if mr != nil {
			n = max(n, len(mr.Runs))
		}
	}
	return n
}

// burstCells returns a burst row's native, flotilla and ratio cells, or
// false when neither mode has a value.
func membersCells(r *measure.MembersResult, row row) ([]string, bool) {
	n, okn := membersNative(r)[row.key]
	f, okf := membersFlotilla(r)[row.key]
	q, okq := r.Ratios[row.key]
	return []string{cell(row.format, n, okn), cell(row.format, f, okf), cell("%.2f", q, okq)}, okn || okf
}

// targetLines are the targets as sentences.
func targetLines(r *measure.MembersResult) []string {
	labels := []struct{ key, label string }{
		{"idle_host_api_requests_per_s_added_per_member", "idle host apiserver requests/s added per member"},
		{"burst_ready_ratio_vs_native", "burst ratio (all pods Ready) vs native with the same node count"},
	}
	var out []string
	for _, l := range labels {
		tc, ok := r.Targets[l.key]
		if !ok {
			continue
		}
		verdict := "met"
		if !tc.Met {
			verdict = "MISSED"
		}
		out = append(out, fmt.Sprintf("%d members: %s %.3f ≤ %.1f: %s", r.Members, l.label, tc.Value, tc.Limit, verdict))
	}
	return out
}

// printMembers writes the members scenario as aligned text.
func printMembers(r *measure.MembersResult, out io.Writer) {
	fmt.Fprintf(out, "\nflotilla members — %d members with %d kwok nodes each (native: a host with %d), bursts of %d pods, median of %d runs\n",
		r.Members, r.NodesPerCluster, r.Members*r.NodesPerCluster, r.Replicas, membersRuns(r))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "metric\tnative\tflotilla\tfl/native\t")
	for _, row := range membersRows {
		if cells, ok := membersCells(r, row); ok {
			fmt.Fprintf(tw, "%s\t%s\t\n", row.label, strings.Join(cells, "\t"))
		}
	}
	tw.Flush()
	printMembersSpread(r, out, "burst.ready_s", "cpu.total_per_1000_pods_s")
	printMembersCPU(r, out)
	fmt.Fprintf(out, "\nidle, %d members:\n", r.Members)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range membersIdleRows {
		if v, ok := r.Idle[row.key]; ok {
			fmt.Fprintf(tw, "%s\t%s\t\n", row.label, cell(row.format, v, true))
		}
	}
	tw.Flush()
	for _, l := range detailLines(r) {
		fmt.Fprintln(out, l)
	}
	for _, l := range targetLines(r) {
		fmt.Fprintf(out, "target: %s\n", l)
	}
	fmt.Fprintf(out, "members: load average before %s, after %s\n", r.LoadBefore, r.LoadAfter)
}

// printCPU writes the CPU seconds each kind of process spent in the
// bursts' measured phases (create and delete), summed over the members:
// what bounds the burst on a machine all the clusters share.
func printMembersCPU(r *measure.MembersResult, out io.Writer) {
	printCPUTable(out, []cpuColumn{{"native", membersNative(r)}, {"flotilla", membersFlotilla(r)}})
}

// detailLines break the idle figures down by verb and resource.
func detailLines(r *measure.MembersResult) []string {
	return []string{
		"host requests/s added per member, by verb and resource: " + detailRates(r.Idle, "members_detail.idle_host_added_per_member_per_s"),
		"host requests/s per member as flotilla-node counts its own: " + detailRates(r.Idle, "members_detail.idle_node_host_requests_per_member_per_s"),
		"host requests/s with no flotilla-node, by verb and resource: " + detailRates(r.Idle, "members_detail.idle_host_without_per_s"),
		"member requests/s per member as flotilla-node counts its own: " + detailRates(r.Idle, "members_detail.idle_node_member_requests_per_member_per_s"),
		"host watches added per member, by resource: " + detailRates(r.Idle, "members_detail.host_watches_added_per_member"),
	}
}

// detailRates lists the metrics under prefix, largest first, with three
// decimals.
func detailRates(s measure.Sample, prefix string) string {
	prefix += "."
	type kv struct {
		k string
		v float64
	}
	var parts []kv
	for _, k := range sortedKeys(s) {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			parts = append(parts, kv{rest, s[k]})
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	// Largest first; sortedKeys already ordered equal values by name.
	for i := 1; i < len(parts); i++ {
		for j := i; j > 0 && math.Abs(parts[j].v) > math.Abs(parts[j-1].v); j-- {
			parts[j], parts[j-1] = parts[j-1], parts[j]
		}
	}
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = fmt.Sprintf("%s %.3f", p.k, p.v)
	}
	return strings.Join(out, ", ")
}

// printSpread writes every run's value of the keys: the spread behind each
// median.
func printMembersSpread(r *measure.MembersResult, out io.Writer, keys ...string) {
	for _, k := range keys {
		var parts []string
		for _, m := range []struct {
			name string
			mr   *measure.ModeResult
		}{{"native", r.Native}, {"flotilla", r.Flotilla}} {
			if m.mr == nil {
				continue
			}
			var vals []string
			for _, run := range m.mr.Runs {
				if v, ok := run[k]; ok {
					vals = append(vals, fmt.Sprintf("%.2f", v))
				}
			}
			if len(vals) > 0 {
				parts = append(parts, m.name+" "+strings.Join(vals, ", "))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(out, "runs of %s: %s\n", k, strings.Join(parts, "; "))
		}
	}
}

// printMarkdown writes the members scenario as Markdown tables.
func printMembersMarkdown(r *measure.MembersResult, out io.Writer) {
	fmt.Fprintf(out, "| metric | native | flotilla | flotilla/native |\n|---|--:|--:|--:|\n")
	for _, row := range membersRows {
		if cells, ok := membersCells(r, row); ok {
			fmt.Fprintf(out, "| %s | %s |\n", row.label, strings.Join(cells, " | "))
		}
	}
	fmt.Fprintf(out, "\n| idle, %d members | |\n|---|--:|\n", r.Members)
	for _, row := range membersIdleRows {
		if v, ok := r.Idle[row.key]; ok {
			fmt.Fprintf(out, "| %s | %s |\n", row.label, cell(row.format, v, true))
		}
	}
	fmt.Fprintln(out)
	for _, l := range detailLines(r) {
		fmt.Fprintf(out, "- %s\n", l)
	}
	for _, l := range targetLines(r) {
		fmt.Fprintf(out, "- target: %s\n", l)
	}
}

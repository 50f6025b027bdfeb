// The scale scenario's tables.

package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"flotilla.io/flotilla/hack/bench/measure"
)

// scaleRows are the scale scenario's metrics printed, in order; the JSON has
// them all.
var scaleRows = []row{
	{"virtual nodes Ready after flotilla-node starts (s)", "nodes_ready_s", "%.1f", false},
	{"member watches held by flotilla-node", "watches.member", "%.0f", false},
	{"member watches, all clients", "watches.member_total", "%.0f", false},
	{"host watches held by flotilla-node", "watches.host", "%.0f", false},
	{"host watches, all clients", "watches.host_total", "%.0f", false},
	{"flotilla-node RSS idle, no pods (MiB)", "footprint.idle_node_rss_mib", "%.1f", false},
	{"flotilla-node idle CPU, no pods (millicores)", "footprint.idle_node_millicores", "%.1f", false},
	{"member API requests/s while idle", "footprint.idle_member_api_requests_per_s", "%.1f", false},
	{"host API requests/s while idle", "footprint.idle_host_api_requests_per_s", "%.1f", false},
	{"idle: lease renewals, fewest of one lease", "heartbeat.idle.min_renewals_per_lease", "%.0f", false},
	{"idle: longest lease renewal gap (s)", "heartbeat.idle.max_renew_gap_s", "%.1f", false},
	{"idle: late lease renewals (gap > 15 s)", "heartbeat.idle.late_renewals", "%.0f", false},
	{"idle: nodes that lost Ready", "heartbeat.idle.nodes_lost_ready", "%.0f", false},
	{"workload: all pods scheduled in the host (s)", "burst.scheduled_s", "%.1f", false},
	{"workload: all member pods created (s)", "burst.member_created_s", "%.1f", false},
	{"workload: all member pods Ready (s)", "burst.member_ready_s", "%.1f", false},
	{"workload: all pods Running+Ready (s)", "burst.ready_s", "%.1f", false},
	{"workload: pod startup p99 (s)", "burst.pod_startup_p99_s", "%.1f", false},
	{"workload: pods per partition, fewest", "workload.pods_per_partition_min", "%.0f", false},
	{"workload: pods per partition, most", "workload.pods_per_partition_max", "%.0f", false},
	{"workload: all pods gone after scaling to 0 (s)", "delete.gone_s", "%.1f", false},
	{"flotilla-node: CPU-s per 1000 pods, create", "footprint.node_cpu_create_per_1000_pods_s", "%.1f", false},
	{"flotilla-node: CPU-s per 1000 pods, delete", "footprint.node_cpu_delete_per_1000_pods_s", "%.1f", false},
	{"all processes: CPU-s per 1000 pods", "cpu.total_per_1000_pods_s", "%.1f", false},
	{"flotilla-node RSS with the pods (MiB)", "footprint.loaded_node_rss_mib", "%.1f", false},
	{"flotilla-node idle CPU with the pods (millicores)", "footprint.loaded_node_millicores", "%.1f", false},
	{"flotilla-node peak RSS (MiB)", "footprint.node_peak_rss_mib", "%.1f", false},
	{"with the workload: longest lease renewal gap (s)", "heartbeat.load.max_renew_gap_s", "%.1f", false},
	{"with the workload: late lease renewals (gap > 15 s)", "heartbeat.load.late_renewals", "%.0f", false},
	{"with the workload: nodes that lost Ready", "heartbeat.load.nodes_lost_ready", "%.0f", false},
	{"member requests refused with 429", "api.member.rejected_429", "%.0f", false},
	{"host requests refused with 429", "api.host.rejected_429", "%.0f", false},
}

// scaleCells returns the row's two cells, or false when neither has a value.
func scaleCells(s *measure.ScaleResult, r row) ([]string, bool) {
	b, okb := s.Baseline[r.key]
	v, oks := s.Scale[r.key]
	return []string{cell(r.format, b, okb), cell(r.format, v, oks)}, okb || oks
}

// detail lists the metrics under prefix with what follows it, e.g.
// "nodes 1, pods 1" for watch_detail.member.
func detail(s measure.Sample, prefix string) string {
	prefix += "."
	var parts []string
	for _, k := range sortedKeys(s) {
		if r, ok := strings.CutPrefix(k, prefix); ok {
			parts = append(parts, fmt.Sprintf("%s %.0f", r, s[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func scaleColumns(s *measure.ScaleResult) (string, string) {
	return "1 partition", fmt.Sprintf("%d partitions", s.Partitions)
}

// printScale writes the scale scenario as aligned text.
func printScale(s *measure.ScaleResult, out io.Writer) {
	fmt.Fprintf(out, "\nflotilla scale — one flotilla-node, %d partitions of a member with %d kwok nodes, %d pods\n", s.Partitions, s.Nodes, s.Pods)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	one, all := scaleColumns(s)
	fmt.Fprintf(tw, "metric\t%s\t%s\t\n", one, all)
	for _, r := range scaleRows {
		if cells, ok := scaleCells(s, r); ok {
			fmt.Fprintf(tw, "%s\t%s\t\n", r.label, strings.Join(cells, "\t"))
		}
	}
	tw.Flush()
	for _, role := range []string{measure.RoleMember, measure.RoleHost} {
		fmt.Fprintf(out, "%s watches of flotilla-node by resource: %s: %s; %s: %s\n", role, one, detail(s.Baseline, "watch_detail."+role), all, detail(s.Scale, "watch_detail."+role))
	}
	for _, role := range []string{measure.RoleMember, measure.RoleHost} {
		if s.Scale["api."+role+".rejected_429"] > 0 {
			fmt.Fprintf(out, "%s requests refused with 429: %s; by flow schema/priority level/reason: %s\n", role, detail(s.Scale, "api_rejected."+role), detail(s.Scale, "apf_rejected."+role))
		}
	}
	for _, n := range s.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	fmt.Fprintf(out, "scale: load average before %s, after %s\n", s.LoadBefore, s.LoadAfter)
}

// printMarkdown writes the scale scenario as a Markdown table.
func printScaleMarkdown(s *measure.ScaleResult, out io.Writer) {
	one, all := scaleColumns(s)
	fmt.Fprintf(out, "| metric | %s | %s |\n|---|--:|--:|\n", one, all)
	for _, r := range scaleRows {
		if cells, ok := scaleCells(s, r); ok {
			fmt.Fprintf(out, "| %s | %s |\n", r.label, strings.Join(cells, " | "))
		}
	}
	fmt.Fprintln(out)
	for _, role := range []string{measure.RoleMember, measure.RoleHost} {
		fmt.Fprintf(out, "- %s watches of flotilla-node by resource: %s: %s; %s: %s\n", role, one, detail(s.Baseline, "watch_detail."+role), all, detail(s.Scale, "watch_detail."+role))
	}
	for _, role := range []string{measure.RoleMember, measure.RoleHost} {
		if s.Scale["api."+role+".rejected_429"] > 0 {
			fmt.Fprintf(out, "- %s requests refused with 429: %s; by flow schema/priority level/reason: %s\n", role, detail(s.Scale, "api_rejected."+role), detail(s.Scale, "apf_rejected."+role))
		}
	}
}

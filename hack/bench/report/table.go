// The results as aligned text: the modes side by side, the spread of runs,
// CPU by process.

package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"flotilla.io/flotilla/hack/bench/measure"
)

// row is one line of the printed table.
type row struct {
	label  string
	key    string
	format string
	ratio  bool // print flotilla/native and flotilla/direct
}

// tableRows are the metrics printed, in order; the JSON has them all.
var tableRows = []row{
	{"burst: all pods Running+Ready (s)", "burst.ready_s", "%.2f", true},
	{"burst: pods per second", "burst.pods_per_s", "%.1f", false},
	{"burst: all pods created (s)", "burst.created_s", "%.2f", true},
	{"burst: flotilla-node error lines (create + delete)", "burst.log_error_lines", "%.0f", false},
	{"burst: flotilla-node warning lines (create + delete)", "burst.log_warning_lines", "%.0f", false},
	{"burst: all pods scheduled (s)", "burst.scheduled_s", "%.2f", true},
	{"burst: pod startup p50 (s)", "burst.pod_startup_p50_s", "%.2f", true},
	{"burst: pod startup p99 (s)", "burst.pod_startup_p99_s", "%.2f", true},
	{"burst: all member pods created (s)", "burst.member_created_s", "%.2f", false},
	{"burst: all member pods Ready (s)", "burst.member_ready_s", "%.2f", false},
	{"burst: status lag member→host p50 (s)", "burst.status_lag_p50_s", "%.3f", false},
	{"burst: status lag member→host p99 (s)", "burst.status_lag_p99_s", "%.3f", false},
	{"delete: all pods gone (s)", "delete.gone_s", "%.2f", true},
	{"delete: all member pods gone (s)", "delete.member_gone_s", "%.2f", false},
	{"propagation: status member→host p50 (s)", "propagation.status_p50_s", "%.3f", false},
	{"propagation: status member→host p99 (s)", "propagation.status_p99_s", "%.3f", false},
	{"propagation: delete host→member p50 (s)", "propagation.delete_p50_s", "%.3f", false},
	{"propagation: delete host→member p99 (s)", "propagation.delete_p99_s", "%.3f", false},
	{"propagation: host pod gone p99 (s)", "propagation.host_gone_p99_s", "%.3f", false},
	{"steady: pods created", "steady.pods", "%.0f", false},
	{"steady: creation rate achieved (pods/s)", "steady.rate_per_s", "%.1f", false},
	{"steady: creation behind schedule at the end (s)", "steady.behind_s", "%.2f", false},
	{"steady: creation, longest gap between creates (s)", "steady.create_gap_max_s", "%.2f", false},
	{"steady: pod startup p50 (s)", "steady.startup_p50_s", "%.2f", true},
	{"steady: pod startup p90 (s)", "steady.startup_p90_s", "%.2f", true},
	{"steady: pod startup p99 (s)", "steady.startup_p99_s", "%.2f", true},
	{"steady: status lag member→host p99 (s)", "steady.status_lag_p99_s", "%.3f", false},
	{"noise: member's own pods Ready, alone (s)", "noise.alone_create_s", "%.2f", false},
	{"noise: member's own pods Ready, during the burst (s)", "noise.during_burst_create_s", "%.2f", false},
	{"noise: member's own pods create, during burst / alone", "noise.create_ratio", "%.2f", false},
	{"noise: member's own pods delete, during burst / alone", "noise.delete_ratio", "%.2f", false},
	{"noise: burst Ready, without noise (s)", "noise.burst_quiet_ready_s", "%.2f", false},
	{"noise: burst Ready, with noise (s)", "noise.burst_noisy_ready_s", "%.2f", false},
	{"noise: burst Ready, with / without noise", "noise.burst_ratio", "%.2f", false},
	{"noise: virtual node status writes during the noise alone", "noise.alone_node_status_writes", "%.0f", false},
	{"noise: flotilla-node CPU-s for the noise alone", "noise.alone_node_cpu_s", "%.2f", false},
	{"quiet: wait for a quiet world before the burst (s)", "quiesce.burst_s", "%.2f", false},
	{"quiet: before propagation (s)", "quiesce.propagation_s", "%.2f", false},
	{"quiet: before steady (s)", "quiesce.steady_s", "%.2f", false},
	{"quiet: before noise (s)", "quiesce.noise_s", "%.2f", false},
	{"api: writes per pod, all clusters", "api.writes_per_pod", "%.2f", true},
	{"api: writes per pod, host", "api.host.writes_per_pod", "%.2f", false},
	{"api: writes per pod, members", "api.member.writes_per_pod", "%.2f", false},
	{"api: reads per pod, all clusters", "api.reads_per_pod", "%.2f", true},
	{"api: watches closed for falling behind per 1000 pods, host", "api.host.watches_terminated_per_1000_pods", "%.0f", false},
	{"api: watches closed for falling behind per 1000 pods, members", "api.member.watches_terminated_per_1000_pods", "%.0f", false},
	{"flotilla-node's own writes per pod, host", "node_api.host.writes_per_pod", "%.2f", false},
	{"flotilla-node's own writes per pod, members", "node_api.member.writes_per_pod", "%.2f", false},
	{"flotilla-node: writes per pod beyond a kubelet's", "node_api.extra_writes_per_pod", "%.2f", false},
	{"cpu: all processes, CPU-s per 1000 pods", "cpu.total_per_1000_pods_s", "%.1f", true},
	{"flotilla-node: CPU-s per 1000 pods", "footprint.node_cpu_per_1000_pods_s", "%.2f", false},
	{"flotilla-node: CPU-s per 1000 pods, create", "footprint.node_cpu_create_per_1000_pods_s", "%.2f", false},
	{"flotilla-node: CPU-s per 1000 pods, delete", "footprint.node_cpu_delete_per_1000_pods_s", "%.2f", false},
	{"flotilla-node: idle CPU, no pods (millicores, sum)", "footprint.idle_node_millicores", "%.1f", false},
	{"flotilla-node: idle CPU, burst pods (millicores, sum)", "footprint.loaded_node_millicores", "%.1f", false},
	{"flotilla-node: RSS idle, no pods (MiB, largest)", "footprint.idle_node_rss_mib", "%.1f", false},
	{"flotilla-node: of its RSS idle, the binary's pages (MiB)", "footprint.idle_node_rss_file_mib", "%.1f", false},
	{"floor: RSS idle of a client-go pod watcher, host + member (MiB)", "footprint.idle_floor_rss_mib", "%.1f", false},
	{"floor: of its RSS idle, the binary's pages (MiB)", "footprint.idle_floor_rss_file_mib", "%.1f", false},
	{"flotilla-node: RSS idle over the floor's", "footprint.idle_node_rss_over_floor", "%.2f", false},
	{"flotilla-node: RSS with burst pods (MiB, largest)", "footprint.loaded_node_rss_mib", "%.1f", false},
	{"flotilla-node: peak RSS (MiB, largest)", "footprint.node_peak_rss_mib", "%.1f", false},
	{"api: requests/s while idle, no pods", "footprint.idle_api_requests_per_s", "%.1f", false},
	{"api: requests/s while idle, burst pods", "footprint.loaded_api_requests_per_s", "%.1f", false},
	{"hostsecrets: data of the host Secrets no pod uses (MiB)", measure.HostSecretsPrefix + "data_mib", "%.1f", false},
	{"hostsecrets: flotilla-node RSS before them (MiB, largest)", measure.HostSecretsPrefix + "node_rss_before_mib", "%.1f", false},
	{"hostsecrets: flotilla-node RSS with them (MiB, largest)", measure.HostSecretsPrefix + "node_rss_after_mib", "%.1f", false},
	{"hostsecrets: flotilla-node RSS they add (MiB)", measure.HostSecretsPrefix + "node_rss_added_mib", "%.1f", false},
	{"memberpods: pods of the member's own", measure.MemberPodsPrefix + "pods", "%.0f", false},
	{"memberpods: flotilla-node RSS before them (MiB, largest)", measure.MemberPodsPrefix + "node_rss_before_mib", "%.1f", false},
	{"memberpods: flotilla-node RSS with them (MiB, largest)", measure.MemberPodsPrefix + "node_rss_after_mib", "%.1f", false},
	{"memberpods: flotilla-node RSS they add (MiB)", measure.MemberPodsPrefix + "node_rss_added_mib", "%.1f", false},
	{"memberpods: flotilla-node RSS they add (KiB per pod)", measure.MemberPodsPrefix + "node_rss_added_kib_per_pod", "%.2f", false},
	{"exported: endpoints of the exported Service", measure.ExportedPrefix + "endpoints", "%.0f", false},
	{"exported: readiness changes counted, before and after the export", measure.ExportedPrefix + "changes", "%.0f", false},
	{"exported: EndpointSlice writes per change, host, not exported (baseline)", measure.ExportedPrefix + "native_host_writes_per_change", "%.2f", false},
	{"exported: EndpointSlice writes per change, host, exported", measure.ExportedPrefix + "host_writes_per_change", "%.2f", false},
	{"exported: of which the broker's (host, exported - baseline)", measure.ExportedPrefix + "broker_writes_per_change", "%.2f", false},
	{"exported: EndpointSlice writes per change, all members, exported", measure.ExportedPrefix + "member_writes_per_change", "%.2f", false},
	{"exported: EndpointSlice writes per change, all members, not exported", measure.ExportedPrefix + "native_member_writes_per_change", "%.2f", false},
	{"exported: of the members', the export's (exported - not exported)", measure.ExportedPrefix + "member_export_writes_per_change", "%.2f", false},
	{"exported: EndpointSlice writes per change, all clusters, exported", measure.ExportedPrefix + "total_writes_per_change", "%.2f", false},
	{"exported: writes per change, exported / baseline", measure.ExportedPrefix + "writes_over_native", "%.2f", false},
	{"exported: change → host slices, not exported, p50 (s)", measure.ExportedPrefix + "native_host_p50_s", "%.3f", false},
	{"exported: change → host slices, exported, p50 (s)", measure.ExportedPrefix + "host_p50_s", "%.3f", false},
	{"exported: change → broker slices, p50 (s)", measure.ExportedPrefix + "broker_p50_s", "%.3f", false},
	{"exported: change → every member's MCS slices, p50 (s)", measure.ExportedPrefix + "members_p50_s", "%.3f", false},
	{"exported: change → every member's MCS slices, p99 (s)", measure.ExportedPrefix + "members_p99_s", "%.3f", false},
	{"exported: change → every member's derived slices, p50 (s)", measure.ExportedPrefix + "members_derived_p50_s", "%.3f", false},
	{"exported: export → every member imports every endpoint (s)", measure.ExportedPrefix + "import_s", "%.2f", false},
	{"exported: export deleted → no copy left (s)", measure.ExportedPrefix + "unexport_s", "%.2f", false},
	{"exported: flotilla-node RSS the export adds (MiB, largest)", measure.ExportedPrefix + "node_rss_added_mib", "%.1f", false},
	{"exported: flotilla-policy RSS before the export (MiB)", measure.ExportedPrefix + "policy_rss_before_mib", "%.1f", false},
	{"exported: flotilla-policy RSS the export adds (MiB)", measure.ExportedPrefix + "policy_rss_added_mib", "%.1f", false},
	{"footprint10k: pods forwarded", measure.Footprint10kPrefix + "pods", "%.0f", false},
	{"footprint10k: all pods Running+Ready (s)", measure.Footprint10kPrefix + "burst.ready_s", "%.1f", false},
	{"footprint10k: flotilla-node RSS with the pods (MiB, largest)", measure.Footprint10kPrefix + "footprint.loaded_node_rss_mib", "%.1f", false},
	{"footprint10k: flotilla-node RSS with the pods (MiB, sum)", measure.Footprint10kPrefix + "footprint.loaded_node_rss_sum_mib", "%.1f", false},
	{"footprint10k: flotilla-node peak RSS (MiB, largest)", measure.Footprint10kPrefix + "footprint.node_peak_rss_mib", "%.1f", false},
	{"footprint10k: flotilla-node idle CPU with the pods (millicores, sum)", measure.Footprint10kPrefix + "footprint.loaded_node_millicores", "%.1f", false},
	{"footprint10k: flotilla-node CPU-s per 1000 pods, create", measure.Footprint10kPrefix + "footprint.node_cpu_create_per_1000_pods_s", "%.2f", false},
	{"footprint10k: flotilla-node CPU-s per 1000 pods, delete", measure.Footprint10kPrefix + "footprint.node_cpu_delete_per_1000_pods_s", "%.2f", false},
	{"footprint10k: all pods gone (s)", measure.Footprint10kPrefix + "delete.gone_s", "%.1f", false},
	{"growth: 1000 pods, flotilla-node CPU-s (create + delete)", measure.GrowthPrefix + "1000.node_cpu_s", "%.1f", false},
	{"growth: 1000 pods, flotilla-node RSS (MiB)", measure.GrowthPrefix + "1000.node_rss_mib", "%.1f", false},
	{"growth: 1000 pods, flotilla-node peak RSS (MiB)", measure.GrowthPrefix + "1000.node_peak_rss_mib", "%.1f", false},
	{"growth: 1000 pods, flotilla-node error + warning lines", measure.GrowthPrefix + "1000.log_lines", "%.0f", false},
	{"growth: 5000 pods, flotilla-node CPU-s (create + delete)", measure.GrowthPrefix + "5000.node_cpu_s", "%.1f", false},
	{"growth: 5000 pods, flotilla-node RSS (MiB)", measure.GrowthPrefix + "5000.node_rss_mib", "%.1f", false},
	{"growth: 5000 pods, flotilla-node peak RSS (MiB)", measure.GrowthPrefix + "5000.node_peak_rss_mib", "%.1f", false},
	{"growth: 5000 pods, flotilla-node error + warning lines", measure.GrowthPrefix + "5000.log_lines", "%.0f", false},
	{"growth: 10000 pods, flotilla-node CPU-s (create + delete)", measure.GrowthPrefix + "10000.node_cpu_s", "%.1f", false},
	{"growth: 10000 pods, flotilla-node RSS (MiB)", measure.GrowthPrefix + "10000.node_rss_mib", "%.1f", false},
	{"growth: 10000 pods, flotilla-node peak RSS (MiB)", measure.GrowthPrefix + "10000.node_peak_rss_mib", "%.1f", false},
	{"growth: 10000 pods, flotilla-node error + warning lines", measure.GrowthPrefix + "10000.log_lines", "%.0f", false},
}

// PrintTable writes the results as aligned text.
func PrintTable(r *measure.Results, out io.Writer) {
	if len(r.Modes) > 0 {
		printModes(r, out)
	}
	if r.Scale != nil {
		printScale(r.Scale, out)
	}
	if r.Members != nil {
		printMembers(r.Members, out)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(out, "ERROR: %s\n", e)
	}
}

// printModes writes the modes' medians and ratios as aligned text.
func printModes(r *measure.Results, out io.Writer) {
	fmt.Fprintf(out, "\nflotilla benchmark — %s cores, %s, %s replicas, median of %s runs\n",
		r.Placement, r.Options["members"]+" members", r.Options["replicas"], r.Options["runs"])
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "metric\tnative\tdirect\tflotilla\tfl/native\tfl/direct\t")
	for _, row := range tableRows {
		cells, ok := modeCells(r, row)
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t\n", row.label, strings.Join(cells, "\t"))
	}
	tw.Flush()
	printModesSpread(r, out, "burst.ready_s", "delete.gone_s", "cpu.total_per_1000_pods_s")
	for _, k := range sortedKeys(r.Derived) {
		fmt.Fprintf(out, "%s: %.2f\n", k, r.Derived[k])
	}
	printModesCPU(r, out)
}

// printCPU writes the CPU seconds each process spent in the measured
// burst phases (create and delete), which shows what bounds the burst.
func printModesCPU(r *measure.Results, out io.Writer) {
	var cols []cpuColumn
	for _, m := range measure.Modes {
		cols = append(cols, cpuColumn{string(m), r.Median(m)})
	}
	printCPUTable(out, cols)
}

// cpuColumn is one column of a CPU table: a mode and its median sample.
type cpuColumn struct {
	name   string
	sample measure.Sample
}

// printCPUTable writes the cpu.<process>_s metrics of the columns'
// samples, one row per process, under a heading; nothing when there are
// none.
func printCPUTable(out io.Writer, cols []cpuColumn) {
	labels := map[string]bool{}
	for _, c := range cols {
		for k := range c.sample {
			if strings.HasPrefix(k, "cpu.") && strings.HasSuffix(k, "_s") && !strings.Contains(k, "per_1000") {
				labels[k] = true
			}
		}
	}
	if len(labels) == 0 {
		return
	}
	fmt.Fprintf(out, "\nCPU seconds during the burst (create + delete phases), median:\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := []string{"process"}
	for _, c := range cols {
		header = append(header, c.name)
	}
	fmt.Fprintf(tw, "%s\t\n", strings.Join(header, "\t"))
	for _, k := range sortedKeys(labels) {
		cells := []string{strings.TrimSuffix(strings.TrimPrefix(k, "cpu."), "_s")}
		for _, c := range cols {
			v, ok := c.sample[k]
			cells = append(cells, cell("%.1f", v, ok))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(cells, "\t"))
	}
	tw.Flush()
}

func cell(format string, v float64, ok bool) string {
	if !ok || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// printSpread writes every run's value of the keys, per mode: the spread
// behind each median.
func printModesSpread(r *measure.Results, out io.Writer, keys ...string) {
	for _, k := range keys {
		var parts []string
		for _, m := range measure.Modes {
			mr, ok := r.Modes[m]
			if !ok {
				continue
			}
			var vals []string
			for _, run := range mr.Runs {
				if v, ok := run[k]; ok {
					vals = append(vals, fmt.Sprintf("%.2f", v))
				}
			}
			if len(vals) > 0 {
				parts = append(parts, fmt.Sprintf("%s %s", m, strings.Join(vals, ", ")))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(out, "runs of %s: %s\n", k, strings.Join(parts, "; "))
		}
	}
}

// modeCells is one metric's row of the modes table: each mode's median,
// then flotilla's ratios to native and to direct. It is false when no mode
// measured the metric, and the row is left out.
func modeCells(r *measure.Results, row row) ([]string, bool) {
	cells := make([]string, 0, 5)
	any := false
	for _, m := range measure.Modes {
		v, ok := r.Median(m)[row.key]
		any = any || ok
		cells = append(cells, cell(row.format, v, ok))
	}
	if !any {
		return nil, false
	}
	rp, ok := r.Ratios[row.key]
	return append(cells, cell("%.2f", rp.FlotillaNative, ok && rp.FlotillaNative != 0),
		cell("%.2f", rp.FlotillaDirect, ok && rp.FlotillaDirect != 0)), true
}

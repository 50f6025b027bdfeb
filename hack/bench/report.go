package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// results is everything one invocation measured, as written by --out.
type results struct {
	Command    string               `json:"command"`
	Placement  string               `json:"placement"` // "shared" or "pinned"
	Started    time.Time            `json:"started"`
	Finished   time.Time            `json:"finished"`
	Machine    machine              `json:"machine"`
	Versions   map[string]string    `json:"versions"`
	LoadBefore string               `json:"loadBefore"`
	LoadAfter  string               `json:"loadAfter"`
	Modes      map[mode]*modeResult `json:"modes"`
	Scale      *scaleResult         `json:"scale,omitempty"`
	Members    *membersResult       `json:"members,omitempty"`
	Ratios     map[string]ratioPair `json:"ratios"`
	Derived    map[string]float64   `json:"derived,omitempty"`
	Options    map[string]string    `json:"options"`
	Errors     []string             `json:"errors,omitempty"`
}

// modeResult is one mode's runs and their per-metric medians.
type modeResult struct {
	Runs   []sample `json:"runs"`
	Median sample   `json:"median"`
	Error  string   `json:"error,omitempty"`
}

// ratioPair is a metric of flotilla relative to the two baselines.
type ratioPair struct {
	FlotillaNative float64 `json:"flotillaOverNative,omitempty"`
	FlotillaDirect float64 `json:"flotillaOverDirect,omitempty"`
}

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
	{"hostsecrets: data of the host Secrets no pod uses (MiB)", hostSecretsPrefix + "data_mib", "%.1f", false},
	{"hostsecrets: flotilla-node RSS before them (MiB, largest)", hostSecretsPrefix + "node_rss_before_mib", "%.1f", false},
	{"hostsecrets: flotilla-node RSS with them (MiB, largest)", hostSecretsPrefix + "node_rss_after_mib", "%.1f", false},
	{"hostsecrets: flotilla-node RSS they add (MiB)", hostSecretsPrefix + "node_rss_added_mib", "%.1f", false},
	{"memberpods: pods of the member's own", memberPodsPrefix + "pods", "%.0f", false},
	{"memberpods: flotilla-node RSS before them (MiB, largest)", memberPodsPrefix + "node_rss_before_mib", "%.1f", false},
	{"memberpods: flotilla-node RSS with them (MiB, largest)", memberPodsPrefix + "node_rss_after_mib", "%.1f", false},
	{"memberpods: flotilla-node RSS they add (MiB)", memberPodsPrefix + "node_rss_added_mib", "%.1f", false},
	{"memberpods: flotilla-node RSS they add (KiB per pod)", memberPodsPrefix + "node_rss_added_kib_per_pod", "%.2f", false},
	{"footprint10k: pods forwarded", footprint10kPrefix + "pods", "%.0f", false},
	{"footprint10k: all pods Running+Ready (s)", footprint10kPrefix + "burst.ready_s", "%.1f", false},
	{"footprint10k: flotilla-node RSS with the pods (MiB, largest)", footprint10kPrefix + "footprint.loaded_node_rss_mib", "%.1f", false},
	{"footprint10k: flotilla-node RSS with the pods (MiB, sum)", footprint10kPrefix + "footprint.loaded_node_rss_sum_mib", "%.1f", false},
	{"footprint10k: flotilla-node peak RSS (MiB, largest)", footprint10kPrefix + "footprint.node_peak_rss_mib", "%.1f", false},
	{"footprint10k: flotilla-node idle CPU with the pods (millicores, sum)", footprint10kPrefix + "footprint.loaded_node_millicores", "%.1f", false},
	{"footprint10k: flotilla-node CPU-s per 1000 pods, create", footprint10kPrefix + "footprint.node_cpu_create_per_1000_pods_s", "%.2f", false},
	{"footprint10k: flotilla-node CPU-s per 1000 pods, delete", footprint10kPrefix + "footprint.node_cpu_delete_per_1000_pods_s", "%.2f", false},
	{"footprint10k: all pods gone (s)", footprint10kPrefix + "delete.gone_s", "%.1f", false},
	{"growth: 1000 pods, flotilla-node CPU-s (create + delete)", growthPrefix + "1000.node_cpu_s", "%.1f", false},
	{"growth: 1000 pods, flotilla-node RSS (MiB)", growthPrefix + "1000.node_rss_mib", "%.1f", false},
	{"growth: 1000 pods, flotilla-node peak RSS (MiB)", growthPrefix + "1000.node_peak_rss_mib", "%.1f", false},
	{"growth: 1000 pods, flotilla-node error + warning lines", growthPrefix + "1000.log_lines", "%.0f", false},
	{"growth: 5000 pods, flotilla-node CPU-s (create + delete)", growthPrefix + "5000.node_cpu_s", "%.1f", false},
	{"growth: 5000 pods, flotilla-node RSS (MiB)", growthPrefix + "5000.node_rss_mib", "%.1f", false},
	{"growth: 5000 pods, flotilla-node peak RSS (MiB)", growthPrefix + "5000.node_peak_rss_mib", "%.1f", false},
	{"growth: 5000 pods, flotilla-node error + warning lines", growthPrefix + "5000.log_lines", "%.0f", false},
	{"growth: 10000 pods, flotilla-node CPU-s (create + delete)", growthPrefix + "10000.node_cpu_s", "%.1f", false},
	{"growth: 10000 pods, flotilla-node RSS (MiB)", growthPrefix + "10000.node_rss_mib", "%.1f", false},
	{"growth: 10000 pods, flotilla-node peak RSS (MiB)", growthPrefix + "10000.node_peak_rss_mib", "%.1f", false},
	{"growth: 10000 pods, flotilla-node error + warning lines", growthPrefix + "10000.log_lines", "%.0f", false},
}

// finish computes medians, ratios and derived figures.
func (r *results) finish() {
	for _, mr := range r.Modes {
		mr.Median = medianSample(mr.Runs)
	}
	r.Ratios = map[string]ratioPair{}
	fl := r.median(modeFlotilla)
	for _, row := range tableRows {
		if !row.ratio {
			continue
		}
		v, ok := fl[row.key]
		if !ok {
			continue
		}
		r.Ratios[row.key] = ratioPair{
			FlotillaNative: ratio(v, r.median(modeNative), row.key),
			FlotillaDirect: ratio(v, r.median(modeDirect), row.key),
		}
	}
	r.Derived = map[string]float64{}
	finishGrowth(fl, r.Derived)
	if d, ok := r.median(modeDirect)["api.writes_per_pod"]; ok {
		if f, ok := fl["api.writes_per_pod"]; ok {
			// What the member itself does for a pod is what a direct create
			// costs; the rest is flotilla's.
			r.Derived["api.extra_writes_per_forwarded_pod_vs_direct"] = f - d
		}
	}
	if n, ok := r.median(modeNative)["api.writes_per_pod"]; ok {
		if f, ok := fl["api.writes_per_pod"]; ok {
			r.Derived["api.extra_writes_per_forwarded_pod_vs_native"] = f - n
		}
	}
	// Issue 7's steady target is an absolute margin: flotilla's p99 startup
	// at most 0.5 s above native's.
	for _, base := range []mode{modeNative, modeDirect} {
		if b, ok := r.median(base)["steady.startup_p99_s"]; ok {
			if f, ok := fl["steady.startup_p99_s"]; ok {
				r.Derived["steady.startup_p99_flotilla_minus_"+string(base)+"_s"] = f - b
			}
		}
	}
}

func (r *results) median(m mode) sample {
	if mr := r.Modes[m]; mr != nil && mr.Median != nil {
		return mr.Median
	}
	return sample{}
}

func ratio(v float64, base sample, key string) float64 {
	b, ok := base[key]
	if !ok || b == 0 {
		return 0
	}
	return v / b
}

// printTable writes the results as aligned text.
func (r *results) printTable(out io.Writer) {
	if len(r.Modes) > 0 {
		r.printModes(out)
	}
	if r.Scale != nil {
		r.Scale.printTable(out)
	}
	if r.Members != nil {
		r.Members.printTable(out)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(out, "ERROR: %s\n", e)
	}
}

// printModes writes the modes' medians and ratios as aligned text.
func (r *results) printModes(out io.Writer) {
	fmt.Fprintf(out, "\nflotilla benchmark — %s cores, %s, %s replicas, median of %s runs\n",
		r.Placement, r.Options["members"]+" members", r.Options["replicas"], r.Options["runs"])
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "metric\tnative\tdirect\tflotilla\tfl/native\tfl/direct\t")
	for _, row := range tableRows {
		cells := make([]string, 0, 5)
		any := false
		for _, m := range allModes {
			v, ok := r.median(m)[row.key]
			any = any || ok
			cells = append(cells, cell(row.format, v, ok))
		}
		if !any {
			continue
		}
		rp, ok := r.Ratios[row.key]
		cells = append(cells, cell("%.2f", rp.FlotillaNative, ok && rp.FlotillaNative != 0),
			cell("%.2f", rp.FlotillaDirect, ok && rp.FlotillaDirect != 0))
		fmt.Fprintf(tw, "%s\t%s\t\n", row.label, strings.Join(cells, "\t"))
	}
	tw.Flush()
	r.printSpread(out, "burst.ready_s", "delete.gone_s", "cpu.total_per_1000_pods_s")
	for _, k := range sortedKeys(r.Derived) {
		fmt.Fprintf(out, "%s: %.2f\n", k, r.Derived[k])
	}
	r.printCPU(out)
}

// printCPU writes the CPU seconds each process spent in the measured
// burst phases (create and delete), which shows what bounds the burst.
func (r *results) printCPU(out io.Writer) {
	var cols []cpuColumn
	for _, m := range allModes {
		cols = append(cols, cpuColumn{string(m), r.median(m)})
	}
	printCPUTable(out, cols)
}

// cpuColumn is one column of a CPU table: a mode and its median sample.
type cpuColumn struct {
	name   string
	sample sample
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

// clean drops values JSON cannot carry (NaN from an empty percentile).
func (s sample) clean() sample {
	for k, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(s, k)
		}
	}
	return s
}

// write stores the results as indented JSON.
func (r *results) write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// printMarkdown writes the medians and ratios, and the scale scenario, as
// Markdown tables for BENCHMARKS.md.
func (r *results) printMarkdown(out io.Writer) {
	if len(r.Modes) > 0 {
		r.printModesMarkdown(out)
	}
	if r.Scale != nil {
		if len(r.Modes) > 0 {
			fmt.Fprintln(out)
		}
		r.Scale.printMarkdown(out)
	}
	if r.Members != nil {
		if len(r.Modes) > 0 || r.Scale != nil {
			fmt.Fprintln(out)
		}
		r.Members.printMarkdown(out)
	}
}

func (r *results) printModesMarkdown(out io.Writer) {
	fmt.Fprintf(out, "| metric | native | direct | flotilla | flotilla/native | flotilla/direct |\n")
	fmt.Fprintf(out, "|---|--:|--:|--:|--:|--:|\n")
	for _, row := range tableRows {
		cells := make([]string, 0, 5)
		any := false
		for _, m := range allModes {
			v, ok := r.median(m)[row.key]
			any = any || ok
			cells = append(cells, cell(row.format, v, ok))
		}
		if !any {
			continue
		}
		rp, ok := r.Ratios[row.key]
		cells = append(cells, cell("%.2f", rp.FlotillaNative, ok && rp.FlotillaNative != 0),
			cell("%.2f", rp.FlotillaDirect, ok && rp.FlotillaDirect != 0))
		fmt.Fprintf(out, "| %s | %s |\n", row.label, strings.Join(cells, " | "))
	}
	if len(r.Derived) > 0 {
		fmt.Fprintln(out)
	}
	for _, k := range sortedKeys(r.Derived) {
		fmt.Fprintf(out, "- %s: %.2f\n", k, r.Derived[k])
	}
}

// readResults loads results written by --out.
func readResults(path string) (*results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &results{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return r, nil
}

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
func (s *scaleResult) scaleCells(r row) ([]string, bool) {
	b, okb := s.Baseline[r.key]
	v, oks := s.Scale[r.key]
	return []string{cell(r.format, b, okb), cell(r.format, v, oks)}, okb || oks
}

// detail lists the metrics under prefix with what follows it, e.g.
// "nodes 1, pods 1" for watch_detail.member.
func detail(s sample, prefix string) string {
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

func (s *scaleResult) columns() (string, string) {
	return "1 partition", fmt.Sprintf("%d partitions", s.Partitions)
}

// printTable writes the scale scenario as aligned text.
func (s *scaleResult) printTable(out io.Writer) {
	fmt.Fprintf(out, "\nflotilla scale — one flotilla-node, %d partitions of a member with %d kwok nodes, %d pods\n", s.Partitions, s.Nodes, s.Pods)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	one, all := s.columns()
	fmt.Fprintf(tw, "metric\t%s\t%s\t\n", one, all)
	for _, r := range scaleRows {
		if cells, ok := s.scaleCells(r); ok {
			fmt.Fprintf(tw, "%s\t%s\t\n", r.label, strings.Join(cells, "\t"))
		}
	}
	tw.Flush()
	for _, role := range []string{roleMember, roleHost} {
		fmt.Fprintf(out, "%s watches of flotilla-node by resource: %s: %s; %s: %s\n", role, one, detail(s.Baseline, "watch_detail."+role), all, detail(s.Scale, "watch_detail."+role))
	}
	for _, role := range []string{roleMember, roleHost} {
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
func (s *scaleResult) printMarkdown(out io.Writer) {
	one, all := s.columns()
	fmt.Fprintf(out, "| metric | %s | %s |\n|---|--:|--:|\n", one, all)
	for _, r := range scaleRows {
		if cells, ok := s.scaleCells(r); ok {
			fmt.Fprintf(out, "| %s | %s |\n", r.label, strings.Join(cells, " | "))
		}
	}
	fmt.Fprintln(out)
	for _, role := range []string{roleMember, roleHost} {
		fmt.Fprintf(out, "- %s watches of flotilla-node by resource: %s: %s; %s: %s\n", role, one, detail(s.Baseline, "watch_detail."+role), all, detail(s.Scale, "watch_detail."+role))
	}
	for _, role := range []string{roleMember, roleHost} {
		if s.Scale["api."+role+".rejected_429"] > 0 {
			fmt.Fprintf(out, "- %s requests refused with 429: %s; by flow schema/priority level/reason: %s\n", role, detail(s.Scale, "api_rejected."+role), detail(s.Scale, "apf_rejected."+role))
		}
	}
}

// printSpread writes every run's value of the keys, per mode: the spread
// behind each median.
func (r *results) printSpread(out io.Writer, keys ...string) {
	for _, k := range keys {
		var parts []string
		for _, m := range allModes {
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

// writeGrowthPlot draws the growth scenario's flotilla median (growth.go).
func (r *results) writeGrowthPlot(path string) error {
	return writeGrowthPlot(path, r.median(modeFlotilla), r.Command)
}

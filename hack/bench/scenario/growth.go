// The growth scenario: flotilla-node's cost at several numbers of pods.

package scenario

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"flotilla.io/flotilla/hack/bench/measure"
)

// growth measures how flotilla-node's cost grows with the pods it forwards:
// for each size of --growth-pods (1,000, 5,000 and 10,000 by default), in
// that order and on a quiet world, a Deployment of that many pods is run
// through create, all Ready, scale to zero and all gone, as in the burst.
// Per size it records flotilla-node's CPU seconds over both phases and its
// RSS with the pods forwarded (VmRSS after --settle) and at its peak
// (VmHWM; the sizes grow, so each peak is its own size's). Run it with
// --members 1 to measure one process: the sums and largest values the
// meter reports are then that process's.
//
// finishGrowth fits a line through the points (cost = intercept + slope x
// pods) and writePlot draws them (--growth-plot).
type growth struct{}

func (growth) name() string                { return "growth" }
func (growth) applies(m measure.Mode) bool { return m == measure.ModeFlotilla }
func (growth) peakPods(o *Options) int {
	sizes, _ := growthSizes(o.GrowthPods)
	return slices.Max(sizes)
}

// growthSizes parses --growth-pods.
func growthSizes(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--growth-pods: %q is not a number of pods", f)
		}
		out = append(out, n)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("--growth-pods needs at least two sizes to fit a line through")
	}
	return out, nil
}

func (growth) run(ctx context.Context, t *target, run int, s measure.Sample) error {
	sizes, err := growthSizes(t.opts.GrowthPods)
	if err != nil {
		return err
	}
	for i, n := range sizes {
		if i > 0 {
			if err := t.quiesce(ctx, "growth_"+strconv.Itoa(n), s); err != nil {
				return err
			}
		}
		m := t.NewMeter()
		name := fmt.Sprintf("growth-%d-%d", run, n)
		logs := t.MarkLogs()
		got, err := runDeployment(ctx, t, name, n, m, workloadHooks{})
		if err != nil {
			return err
		}
		m.Report(got, n)
		t.countLogs(logs, "log", got)
		p := measure.GrowthPrefix + strconv.Itoa(n) + "."
		s[p+"node_cpu_s"] = m.CPU("flotilla-node") // create and delete, every flotilla-node
		s[p+"node_rss_mib"] = got["footprint.loaded_node_rss_sum_mib"]
		s[p+"node_peak_rss_mib"] = got["footprint.node_peak_rss_mib"]
		s[p+"ready_s"] = got["burst.ready_s"]
		s[p+"log_lines"] = got["log.log_error_lines"] + got["log.log_warning_lines"]
		t.Logf("%s run %d: growth %d pods: flotilla-node %.1f CPU-s, RSS %.1f MiB, peak %.1f MiB; Ready %.1fs",
			t.Mode, run, n, s[p+"node_cpu_s"], s[p+"node_rss_mib"], s[p+"node_peak_rss_mib"], s[p+"ready_s"])
	}
	return nil
}

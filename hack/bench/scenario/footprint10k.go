// The footprint10k scenario: flotilla-node with 10,000 pods forwarded.

package scenario

import (
	"context"
	"strconv"

	"flotilla.io/flotilla/hack/bench/measure"
)

// footprint10k is the footprint (measure.Meter) with many pods forwarded at
// once: a Deployment of --footprint-pods (10,000) pods created in the host
// until all are Running and Ready there and in the members; then, as in the
// burst, --settle, flotilla-node's RSS (VmRSS, the largest and the sum of
// the flotilla-nodes) and its CPU over --idle-window with the pods
// forwarded; then scaled to zero until every pod is gone. The target
// is flotilla-node at most 150 MiB RSS with 10,000 pods.
//
// Peak RSS is VmHWM, the peak over flotilla-node's life, which includes
// the scenarios run before this one in the same world; with this many pods
// the peak is this scenario's. It is opt-in: with 10,000 pods it takes
// many minutes (BENCHMARKS.md), more than the default --phase-timeout may
// allow.
//
// With --profile-dir, a heap profile of every flotilla-node is also taken
// the moment all pods are Ready (<placement>-<member>.ready.heap.pprof),
// after a garbage collection: the live heap that holds the pods, which a
// profile taken at a set time after the start may miss, mid-deletion. At
// that moment the last status updates may still be queued in the
// informers; a second one (.loaded.heap.pprof) is taken once the pods
// have been held through --settle and --idle-window, what a steady
// flotilla-node holds for them.
//
// Every metric runDeployment and the meter take is kept, under
// "footprint10k." followed by the burst's name for it (so
// footprint10k.burst.ready_s is when the last of these pods was Ready).
type footprint10k struct{}

func (footprint10k) name() string                { return "footprint10k" }
func (footprint10k) applies(m measure.Mode) bool { return m == measure.ModeFlotilla }
func (footprint10k) peakPods(o *Options) int     { return o.FootprintPods }

func (footprint10k) run(ctx context.Context, t *target, run int, s measure.Sample) error {
	n := t.opts.FootprintPods
	// A meter of its own: the burst's meter holds that scenario's phases.
	m := t.NewMeter()
	var hooks workloadHooks
	if dir := t.opts.ProfileDir; dir != "" {
		hooks.ready = func(measure.PodWatches, measure.PodWatches) error {
			return t.heapProfiles(ctx, "ready")
		}
		hooks.loaded = func() error { return t.heapProfiles(ctx, "loaded") }
	}
	got, err := runDeployment(ctx, t, "footprint10k-"+strconv.Itoa(run), n, m, hooks)
	if err != nil {
		return err
	}
	m.Report(got, n)
	for k, v := range got {
		s[measure.Footprint10kPrefix+k] = v
	}
	s[measure.Footprint10kPrefix+"pods"] = float64(n)
	t.Logf("%s run %d: %d pods forwarded: all Ready %.1fs, flotilla-node RSS %.1f MiB (largest), peak %.1f MiB, idle %.1f millicores; gone %.1fs",
		t.Mode, run, n, got["burst.ready_s"], got["footprint.loaded_node_rss_mib"], got["footprint.node_peak_rss_mib"],
		got["footprint.loaded_node_millicores"], got["delete.gone_s"])
	return nil
}

package main

import (
	"context"
	"strconv"
)

// footprint10k is the footprint (footprint.go) with many pods forwarded at
// once: a Deployment of --footprint-pods (10,000) pods created in the host
// until all are Running and Ready there and in the members; then, as in the
// burst, --settle, flotilla-node's RSS (VmRSS, the largest and the sum of
// the flotilla-nodes) and its CPU over --idle-window with the pods
// forwarded; then scaled to zero until every pod is gone. Issue 7's target
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

func (footprint10k) name() string            { return "footprint10k" }
func (footprint10k) applies(m mode) bool     { return m == modeFlotilla }
func (footprint10k) peakPods(o *options) int { return o.footprintPods }

// footprint10kPrefix prefixes the scenario's metrics.
const footprint10kPrefix = "footprint10k."

func (footprint10k) run(ctx context.Context, t *target, run int, s sample) error {
	n := t.opts.footprintPods
	// A meter of its own: the burst's meter holds that scenario's phases.
	m := newMeter(t)
	var hooks workloadHooks
	if dir := t.opts.profileDir; dir != "" {
		hooks.ready = func(podWatches, podWatches) error {
			return heapProfiles(ctx, t, dir, "ready")
		}
		hooks.loaded = func() error { return heapProfiles(ctx, t, dir, "loaded") }
	}
	got, err := runDeployment(ctx, t, "footprint10k-"+strconv.Itoa(run), n, m, hooks)
	if err != nil {
		return err
	}
	m.report(got, n)
	for k, v := range got {
		s[footprint10kPrefix+k] = v
	}
	s[footprint10kPrefix+"pods"] = float64(n)
	t.logf("%s run %d: %d pods forwarded: all Ready %.1fs, flotilla-node RSS %.1f MiB (largest), peak %.1f MiB, idle %.1f millicores; gone %.1fs",
		t.mode, run, n, got["burst.ready_s"], got["footprint.loaded_node_rss_mib"], got["footprint.node_peak_rss_mib"],
		got["footprint.loaded_node_millicores"], got["delete.gone_s"])
	return nil
}

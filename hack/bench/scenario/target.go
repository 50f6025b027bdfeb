// A world prepared for the scenarios of one mode.

package scenario

import (
	"context"
	"fmt"

	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/hack/bench/world"
	"flotilla.io/flotilla/test/testworld"
)

// target is a world prepared for one mode, with the options every scenario
// reads.
type target struct {
	*world.Target
	opts *Options
}

// start starts the world for m (world.Start) and prepares the bench
// namespace. The caller stops t.World.
func start(ctx context.Context, m measure.Mode, o *Options, bin testworld.Bin, nodeBinary, dir string, logf func(string, ...any)) (*target, error) {
	wt, err := world.Start(ctx, m, o.world(), bin, nodeBinary, dir, logf)
	if err != nil {
		return nil, err
	}
	t := &target{Target: wt, opts: o}
	if err := t.prepareNamespace(ctx); err != nil {
		if stopErr := wt.World.Stop(); stopErr != nil {
			logf("%v", stopErr)
		}
		return nil, err
	}
	return t, nil
}

// prepareNamespace creates the bench namespace where the user works and
// runs a small Deployment to Ready and back to zero so that every cluster
// involved has served the namespace once.
func (t *target) prepareNamespace(ctx context.Context) error {
	if _, err := world.CreateNamespace(ctx, t.User, world.BenchNamespace); err != nil {
		return err
	}
	replicas := max(len(t.Members), 1) * 2
	if _, err := runDeployment(ctx, t, "warmup", replicas, nil, workloadHooks{}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// quiesce waits until the world is quiet, within --phase-timeout, before
// the scenario called name.
func (t *target) quiesce(ctx context.Context, name string, s measure.Sample) error {
	return t.Quiesce(ctx, t.opts.PhaseTimeout, name, s)
}

// countLogs adds the error and warning lines the flotilla-nodes logged
// since mark to s, under phase.
func (t *target) countLogs(mark measure.LogMark, phase string, s measure.Sample) {
	mark.Count(phase, s, t.Logf)
}

// profiles starts CPU profiles of every flotilla-node, named after
// placement, when --profile-dir asks for them; the returned function, nil
// otherwise, waits for them.
func (t *target) profiles(ctx context.Context, placement string) func() error {
	if t.opts.ProfileDir == "" {
		return nil
	}
	return measure.CPUProfiles(ctx, t.Profiling(), t.opts.ProfileDir, placement, t.opts.ProfileDuration)
}

// heapProfiles takes a heap profile of every flotilla-node, named what, into
// --profile-dir.
func (t *target) heapProfiles(ctx context.Context, what string) error {
	return measure.HeapProfiles(ctx, t.Profiling(), t.opts.ProfileDir, measure.PlacementName(t.opts.Pin), what)
}

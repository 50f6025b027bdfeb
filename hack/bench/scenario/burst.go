// The burst scenario: a Deployment to all Ready and back to zero.

package scenario

import (
	"context"
	"strconv"

	"flotilla.io/flotilla/hack/bench/measure"
)

// burst creates a Deployment of --replicas pods where the user works and
// times until every pod is Running and Ready there, then scales it to zero
// and times until every pod is gone there and, in flotilla mode, from the
// members too. The footprint meter measures both phases.
type burst struct{}

func (burst) name() string              { return "burst" }
func (burst) applies(measure.Mode) bool { return true }
func (burst) peakPods(o *Options) int   { return o.Replicas }

func (burst) run(ctx context.Context, t *target, run int, s measure.Sample) error {
	t.Meter.Reset()
	logs := t.MarkLogs()
	got, err := runDeployment(ctx, t, "burst-"+strconv.Itoa(run), t.opts.Replicas, t.Meter, workloadHooks{})
	if err != nil {
		return err
	}
	t.countLogs(logs, "burst", s)
	for k, v := range got {
		s[k] = v
	}
	t.Meter.Report(s, t.opts.Replicas)
	return nil
}

// The propagation scenario: status and deletion one pod at a time.

package scenario

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/hack/bench/world"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// propagation times single changes crossing flotilla, one pod at a time at
// a steady pace (--probe-interval), on --probe-pods bare pods created in
// the host:
//   - status: the member pod's Ready condition is set to False through the
//     member's pods/status, as a member kubelet reports a failing readiness
//     probe; the latency ends when the host watch shows the host pod not
//     Ready;
//   - deletion: the host pod is deleted as a user would (default grace
//     period); the latency ends when the member watch sees the member pod
//     gone (and, reported too, the host watch the host pod).
//
// Bare pods rather than a Deployment's: no controller replaces them.
type propagation struct{}

func (propagation) name() string                { return "propagation" }
func (propagation) applies(m measure.Mode) bool { return m == measure.ModeFlotilla }
func (propagation) peakPods(o *Options) int     { return o.ProbePods }

func (propagation) run(ctx context.Context, t *target, run int, s measure.Sample) error {
	name := "probe-" + strconv.Itoa(run)
	count := t.opts.ProbePods
	user, members, err := watchWorkload(ctx, t, name)
	if err != nil {
		return err
	}
	defer user.Stop()
	defer members.Stop()
	ctx, cancel := context.WithTimeout(ctx, t.opts.PhaseTimeout)
	defer cancel()

	hostPods := t.User.Client().CoreV1().Pods(world.BenchNamespace)
	names := make([]string, count)
	for i := range names {
		names[i] = name + "-" + strconv.Itoa(i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: world.BenchNamespace, Labels: map[string]string{"app": name}},
			Spec:       podSpec(),
		}
		if _, err := hostPods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s in %s: %w", names[i], t.User.Name, err)
		}
	}
	defer func() {
		// Clean up after a failure; on success the pods are gone already.
		for _, n := range names {
			_ = hostPods.Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	}()
	if err := user.WaitCount(ctx, "Running and Ready", count, measure.IsReady); err != nil {
		return err
	}
	if err := members.WaitCount(ctx, "Running and Ready", count, measure.IsReady); err != nil {
		return err
	}
	// Starting --probe-pods pods queues a few status updates per pod in
	// flotilla-node; the probes measure single changes, not that backlog
	// (the burst's status lag measures flotilla under load).
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(t.opts.ProbeSettle):
	}

	statusStarts, err := paced(ctx, names, t.opts.ProbeInterval, func(ctx context.Context, pod string) error {
		return setMemberUnready(ctx, t, members, pod)
	})
	if err != nil {
		return err
	}
	if err := user.WaitCount(ctx, "not Ready in the host", count, measure.IsUnready); err != nil {
		return err
	}
	status := measure.Latencies(statusStarts, user.Times(measure.UnreadyAt))
	s["propagation.status_p50_s"] = measure.Percentile(status, 50)
	s["propagation.status_p99_s"] = measure.Percentile(status, 99)

	deleteStarts, err := paced(ctx, names, t.opts.ProbeInterval, func(ctx context.Context, pod string) error {
		if err := hostPods.Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete pod %s in %s: %w", pod, t.User.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := members.WaitCount(ctx, "gone", count, measure.IsGone); err != nil {
		return err
	}
	if err := user.WaitCount(ctx, "gone", count, measure.IsGone); err != nil {
		return err
	}
	memberGone := measure.Latencies(deleteStarts, members.Times(measure.GoneAt))
	hostGone := measure.Latencies(deleteStarts, user.Times(measure.GoneAt))
	s["propagation.delete_p50_s"] = measure.Percentile(memberGone, 50)
	s["propagation.delete_p99_s"] = measure.Percentile(memberGone, 99)
	s["propagation.host_gone_p50_s"] = measure.Percentile(hostGone, 50)
	s["propagation.host_gone_p99_s"] = measure.Percentile(hostGone, 99)
	return nil
}

// paced calls f for each name, one every interval, and returns when each
// call started.
func paced(ctx context.Context, names []string, interval time.Duration, f func(context.Context, string) error) (map[string]time.Time, error) {
	starts := map[string]time.Time{}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for _, n := range slices.Sorted(slices.Values(names)) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		starts[n] = time.Now()
		if err := f(ctx, n); err != nil {
			return nil, err
		}
	}
	return starts, nil
}

// setMemberUnready sets the Ready condition of the member pod forwarded
// from host pod name to False, through pods/status, as a kubelet whose
// readiness probe fails would. kwok leaves Running pods' conditions alone,
// so nothing but flotilla carries the change to the host.
func setMemberUnready(ctx context.Context, t *target, members measure.PodWatches, name string) error {
	i, p := members.Find(name)
	if i < 0 {
		return fmt.Errorf("no member pod for host pod %s", name)
	}
	c := t.Members[i]
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"BenchProbe","message":"set by hack/bench","lastTransitionTime":%q}]}}`,
		time.Now().UTC().Format(time.RFC3339))
	_, err := c.Client().CoreV1().Pods(p.Namespace).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("set pod %s/%s not Ready in %s: %w", p.Namespace, name, c.Name, err)
	}
	return nil
}

// The steady scenario: pods created at a steady rate.

package scenario

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/hack/bench/world"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// steady creates bare pods where the user works at a steady pace,
// --steady-rate a second for --steady-duration, and measures each pod's
// startup latency as the Kubernetes pod startup SLI defines it: from the
// pod's creation until a watch where the user created it observes the pod
// Running with every container Ready. The creation is the bench's clock
// just before the create call: creationTimestamp has only a second's
// resolution, coarser than what is measured. Then all the pods are deleted
// and the scenario waits until they are gone where they were created and,
// in flotilla mode, from the members.
//
// The target is flotilla's p99 within 0.5 s of native's: under a
// steady load, unlike the burst, nothing should queue, so the difference is
// what forwarding and the status coming back cost one pod.
type steady struct{}

func (steady) name() string              { return "steady" }
func (steady) applies(measure.Mode) bool { return true }
func (steady) peakPods(o *Options) int   { return steadyPods(o) }

// steadyPods is how many pods the steady scenario creates.
func steadyPods(o *Options) int {
	return int(math.Round(o.SteadyRate * o.SteadyDuration.Seconds()))
}

func (steady) run(ctx context.Context, t *target, run int, s measure.Sample) error {
	name := "steady-" + strconv.Itoa(run)
	count := steadyPods(t.opts)
	interval := time.Duration(float64(time.Second) / t.opts.SteadyRate)
	user, members, err := watchWorkload(ctx, t, name)
	if err != nil {
		return err
	}
	defer user.Stop()
	defer members.Stop()
	pods := t.User.Client().CoreV1().Pods(world.BenchNamespace)
	selector := metav1.ListOptions{LabelSelector: "app=" + name}
	defer func() {
		// Clean up after a failure; on success the pods are gone already.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = pods.DeleteCollection(ctx, metav1.DeleteOptions{}, selector)
	}()

	createCtx, cancel := context.WithTimeout(ctx, t.opts.PhaseTimeout)
	defer cancel()
	names := make([]string, count)
	for i := range names {
		names[i] = name + "-" + strconv.Itoa(i)
	}
	// A second's worth of creates may be in flight at once; if the
	// apiserver takes longer than that, creation falls behind and says so.
	inflight := max(1, int(math.Ceil(t.opts.SteadyRate)))
	p, err := paceOpen(createCtx, names, interval, inflight, func(ctx context.Context, pod string) error {
		obj := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: world.BenchNamespace, Labels: map[string]string{"app": name}},
			Spec:       podSpec(),
		}
		if _, err := pods.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s in %s: %w", pod, t.User.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := user.WaitCount(createCtx, "Running and Ready", count, measure.IsReady); err != nil {
		return err
	}
	if err := members.WaitCount(createCtx, "Running and Ready", count, measure.IsReady); err != nil {
		return err
	}
	s["steady.pods"] = float64(count)
	p.report(s, "steady")
	startup := measure.Latencies(p.starts, user.Times(measure.ReadyAt))
	measure.AddPercentiles(s, "steady.startup", startup, 50, 90, 99)
	if len(members) > 0 {
		measure.AddPercentiles(s, "steady.member_startup", measure.Latencies(p.starts, members.Times(measure.ReadyAt)), 50, 99)
		measure.AddPercentiles(s, "steady.status_lag", measure.Latencies(members.Times(measure.ReadyAt), user.Times(measure.ReadyAt)), 50, 99)
	}
	t.Logf("%s run %d: steady %d pods at %.1f/s (%.0f ticks missed): startup p50 %.2fs, p99 %.2fs",
		t.Mode, run, count, s["steady.rate_per_s"], s["steady.ticks_missed"], s["steady.startup_p50_s"], s["steady.startup_p99_s"])

	deleteCtx, cancel := context.WithTimeout(ctx, t.opts.PhaseTimeout)
	defer cancel()
	t1 := time.Now()
	if err := pods.DeleteCollection(deleteCtx, metav1.DeleteOptions{}, selector); err != nil {
		return fmt.Errorf("delete pods %s in %s: %w", selector.LabelSelector, t.User.Name, err)
	}
	if err := user.WaitCount(deleteCtx, "gone", count, measure.IsGone); err != nil {
		return err
	}
	if err := members.WaitCount(deleteCtx, "gone", count, measure.IsGone); err != nil {
		return err
	}
	s["steady.delete_gone_s"] = measure.Seconds(user.Latest(measure.GoneAt).Sub(t1))
	if len(members) > 0 {
		s["steady.delete_member_gone_s"] = measure.Seconds(members.Latest(measure.GoneAt).Sub(t1))
	}
	return nil
}

// pacing is how closely paceOpen kept to its schedule, in which the i-th
// call is due i intervals after the first.
type pacing struct {
	// starts is when each call began, by name.
	starts map[string]time.Time
	// first and last are when the first and the last call were made.
	first, last time.Time
	// interval is the pace asked for; maxGap is the longest time between
	// two calls made one after the other.
	interval, maxGap time.Duration
}

// behind is how long after it was due the last call was made: the ticks
// missed, as pacing drops them rather than make them up.
func (p pacing) behind() time.Duration {
	if len(p.starts) == 0 {
		return 0
	}
	return max(0, p.last.Sub(p.first)-time.Duration(len(p.starts)-1)*p.interval)
}

// paceOpen calls f for each name, one every interval, each on a goroutine
// of its own so that a slow call does not hold up the next (an open loop,
// as independent users creating pods are), at most inflight at once. A
// ticker paces it: ticks missed (inflight reached, or the bench itself not
// scheduled on a busy machine) are dropped, not made up in a burst, and
// pacing records them. The first error stops it.
func paceOpen(ctx context.Context, names []string, interval time.Duration, inflight int, f func(context.Context, string) error) (pacing, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := pacing{starts: make(map[string]time.Time, len(names)), interval: interval}
	var (
		mu       sync.Mutex // guards p.starts and firstErr
		firstErr error
		wg       sync.WaitGroup
	)
	slots := make(chan struct{}, inflight)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i, name := range names {
		if i > 0 {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		select {
		case <-ctx.Done():
		case slots <- struct{}{}:
		}
		if ctx.Err() != nil {
			break
		}
		now := time.Now()
		if i == 0 {
			p.first = now
		} else {
			p.maxGap = max(p.maxGap, now.Sub(p.last))
		}
		p.last = now
		wg.Go(func() {
			defer func() { <-slots }()
			at := time.Now()
			err := f(ctx, name)
			mu.Lock()
			defer mu.Unlock()
			p.starts[name] = at
			if err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return p, firstErr
	}
	return p, ctx.Err()
}

// report records how the pacing went under prefix: the rate achieved, how
// far behind its schedule the creation ended, in time and in ticks missed,
// and the longest gap between two creates.
func (p pacing) report(s measure.Sample, prefix string) {
	if n := len(p.starts); n > 1 && p.last.After(p.first) {
		s[prefix+".rate_per_s"] = float64(n-1) / p.last.Sub(p.first).Seconds()
	}
	s[prefix+".behind_s"] = measure.Seconds(p.behind())
	s[prefix+".ticks_missed"] = math.Round(float64(p.behind()) / float64(p.interval))
	s[prefix+".create_gap_max_s"] = measure.Seconds(p.maxGap)
}

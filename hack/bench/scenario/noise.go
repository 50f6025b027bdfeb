// The noise scenario: a member's own workload and flotilla's, alone and
// together.

package scenario

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/hack/bench/world"
	"flotilla.io/flotilla/test/testworld"
)

// noise checks the claim that a member's own workload and flotilla's
// do not slow each other down. The noise is a Deployment of --noise-pods
// pods of the member's own (member-1, namespace bench-noise: no host
// namespace maps to it, so flotilla forwards nothing there and sees these
// pods only as capacity that others use), created until all are Running and
// Ready, then scaled to zero until all are gone. Each run measures, in this
// order:
//
//  1. the noise alone, nothing else running: the member's own create and
//     delete times; in flotilla mode also flotilla-node's CPU seconds and
//     the virtual node status writes to the host meanwhile;
//  2. a burst Deployment of --replicas where the user works, without noise;
//  3. the same burst again, the noise starting as its Deployment is
//     created, and the noise's own times while the burst runs.
//
// and reports within the run noise during the burst / noise alone and
// burst with noise / burst without (medians over runs of these ratios).
//
// The burst without noise is run here rather than taken from the burst
// scenario of the same run, so that the two bursts run back to back and
// alike (neither metered; between the burst scenario and this one other
// scenarios run), and so that noise needs no other scenario selected. It
// costs one more unmetered burst per run.
//
// Direct mode runs the same scenario with the burst created in member-1
// itself: how much a burst of the same size slows a member's own pods, and
// they it, without flotilla — the baseline for flotilla mode, where a third
// of the burst reaches member-1. On shared cores every cluster competes for
// the same CPUs, so a ratio above 1 there does not by itself blame flotilla.
type noise struct{}

func (noise) name() string { return "noise" }
func (noise) applies(m measure.Mode) bool {
	return m == measure.ModeDirect || m == measure.ModeFlotilla
}
func (noise) peakPods(o *Options) int { return o.Replicas + o.NoisePods }

// noiseNamespace holds the member's own pods.
const noiseNamespace = "bench-noise"

// noiseWarmup is the size of the Deployment that gives the noise namespace
// its first use, so that the first run does not pay for it.
const noiseWarmup = 2

// noiseCluster is the member whose own pods the noise is.
func noiseCluster(t *target) *testworld.Cluster {
	if len(t.Members) > 0 {
		return t.Members[0]
	}
	return t.User
}

func (noise) run(ctx context.Context, t *target, run int, s measure.Sample) error {
	c := noiseCluster(t)
	count := t.opts.NoisePods
	created, err := world.CreateNamespace(ctx, c, noiseNamespace)
	if err != nil {
		return err
	}
	if created {
		if _, _, err := noiseCycle(ctx, t, c, "noise-warmup", noiseWarmup); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	r := strconv.Itoa(run)

	// 1. The noise alone.
	var m *measure.Meter
	if t.Mode == measure.ModeFlotilla {
		m = t.NewMeter()
		if err := m.Start(ctx); err != nil {
			return err
		}
	}
	aloneCreate, aloneDelete, err := noiseCycle(ctx, t, c, "noise-alone-"+r, count)
	if err != nil {
		return fmt.Errorf("noise alone: %w", err)
	}
	if m != nil {
		if err := m.Stop(ctx, "noise"); err != nil {
			return err
		}
		// What the member's own pods make flotilla-node write to the host
		// is the virtual node's status (capacity others use); its other
		// host writes in the window (lease renewals, events it is still
		// mirroring for the previous scenario's pods) are kept apart.
		host := m.Requests(measure.RoleHost)
		s["noise.alone_host_writes"] = host.ByClass()[measure.ClassWrite]
		s["noise.alone_node_status_writes"] = host["PATCH nodes/status"] + host["PUT nodes/status"]
		for k, v := range host {
			s["noise_detail.alone.host."+k] = v
		}
		s["noise.alone_node_cpu_s"] = m.CPU("flotilla-node")
	}
	s["noise.alone_create_s"] = measure.Seconds(aloneCreate)
	s["noise.alone_delete_s"] = measure.Seconds(aloneDelete)

	// 2. The burst without noise.
	quiet, err := runDeployment(ctx, t, "noise-quiet-"+r, t.opts.Replicas, nil, workloadHooks{})
	if err != nil {
		return fmt.Errorf("burst without noise: %w", err)
	}

	// 3. The burst with noise.
	type cycle struct {
		create, del time.Duration
		err         error
	}
	noiseCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done chan cycle
	loud, err := runDeployment(ctx, t, "noise-loud-"+r, t.opts.Replicas, nil, workloadHooks{started: func() {
		done = make(chan cycle, 1)
		go func() {
			create, del, err := noiseCycle(noiseCtx, t, c, "noise-during-"+r, count)
			done <- cycle{create, del, err}
		}()
	}})
	if err != nil {
		cancel()
		if done != nil {
			<-done
		}
		return fmt.Errorf("burst with noise: %w", err)
	}
	during := <-done // noiseCycle is bounded by --phase-timeout
	if during.err != nil {
		return fmt.Errorf("noise during the burst: %w", during.err)
	}
	s["noise.during_burst_create_s"] = measure.Seconds(during.create)
	s["noise.during_burst_delete_s"] = measure.Seconds(during.del)
	s["noise.burst_quiet_ready_s"] = quiet["burst.ready_s"]
	s["noise.burst_noisy_ready_s"] = loud["burst.ready_s"]
	s["noise.burst_quiet_gone_s"] = quiet["delete.gone_s"]
	s["noise.burst_noisy_gone_s"] = loud["delete.gone_s"]
	addRatio(s, "noise.create_ratio", s["noise.during_burst_create_s"], s["noise.alone_create_s"])
	addRatio(s, "noise.delete_ratio", s["noise.during_burst_delete_s"], s["noise.alone_delete_s"])
	addRatio(s, "noise.burst_ratio", s["noise.burst_noisy_ready_s"], s["noise.burst_quiet_ready_s"])
	addRatio(s, "noise.burst_gone_ratio", s["noise.burst_noisy_gone_s"], s["noise.burst_quiet_gone_s"])
	t.Logf("%s run %d: noise of %d pods: alone %.2fs/%.2fs, during the burst %.2fs/%.2fs (create/delete); burst %.2fs without, %.2fs with",
		t.Mode, run, count, s["noise.alone_create_s"], s["noise.alone_delete_s"], s["noise.during_burst_create_s"],
		s["noise.during_burst_delete_s"], s["noise.burst_quiet_ready_s"], s["noise.burst_noisy_ready_s"])
	return nil
}

// addRatio records num/den as key unless den is zero.
func addRatio(s measure.Sample, key string, num, den float64) {
	if den != 0 {
		s[key] = num / den
	}
}

// noiseCycle creates a Deployment of count pods in c's noise namespace and
// waits until all are Running and Ready, then scales it to zero and waits
// until all are gone, all within --phase-timeout, and returns how long each
// took as a watch in c saw it.
func noiseCycle(ctx context.Context, t *target, c *testworld.Cluster, name string, count int) (create, del time.Duration, err error) {
	return ownCycle(ctx, t, c, name, count, ownHooks{})
}

// ownHooks adapt ownCycle to a scenario; the zero value runs the noise.
type ownHooks struct {
	// shape changes the Deployment before it is created.
	shape func(*appsv1.Deployment)
	// running is called once all pods are Running and Ready, before the
	// Deployment is scaled to zero.
	running func(context.Context) error
}

// ownCycle is noiseCycle with hooks: a Deployment of the member's own.
func ownCycle(ctx context.Context, t *target, c *testworld.Cluster, name string, count int, hooks ownHooks) (create, del time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.PhaseTimeout)
	defer cancel()
	w, err := measure.WatchPods(ctx, c.Client(), c.Name, noiseNamespace, "app="+name, measure.NewNotifier(), time.Now)
	if err != nil {
		return 0, 0, err
	}
	pods := measure.PodWatches{w}
	defer pods.Stop()
	deployments := c.Client().AppsV1().Deployments(noiseNamespace)
	defer func() {
		// Clean up even after a failure; the pods are gone already on success.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = deployments.Delete(ctx, name, metav1.DeleteOptions{})
	}()
	d := deployment(name, count)
	d.Namespace = noiseNamespace
	if hooks.shape != nil {
		hooks.shape(d)
	}
	t0 := time.Now()
	if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return 0, 0, fmt.Errorf("create deployment %s/%s in %s: %w", noiseNamespace, name, c.Name, err)
	}
	if err := pods.WaitCount(ctx, "Running and Ready", count, measure.IsReady); err != nil {
		return 0, 0, err
	}
	create = pods.Latest(measure.ReadyAt).Sub(t0)
	if hooks.running != nil {
		if err := hooks.running(ctx); err != nil {
			return create, 0, err
		}
	}
	t1 := time.Now()
	scale := []byte(`{"spec":{"replicas":0}}`)
	if _, err := deployments.Patch(ctx, name, types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		return create, 0, fmt.Errorf("scale deployment %s/%s in %s to 0: %w", noiseNamespace, name, c.Name, err)
	}
	if err := pods.WaitCount(ctx, "gone", count, measure.IsGone); err != nil {
		return create, 0, err
	}
	return create, pods.Latest(measure.GoneAt).Sub(t1), nil
}

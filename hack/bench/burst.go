package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// burst creates a Deployment of --replicas pods where the user works and
// times until every pod is Running and Ready there, then scales it to zero
// and times until every pod is gone there and, in flotilla mode, from the
// members too. The footprint meter measures both phases.
type burst struct{}

func (burst) name() string            { return "burst" }
func (burst) applies(mode) bool       { return true }
func (burst) peakPods(o *options) int { return o.replicas }

func (burst) run(ctx context.Context, t *target, run int, s sample) error {
	t.meter.reset()
	logs := t.markLogs()
	got, err := runDeployment(ctx, t, "burst-"+strconv.Itoa(run), t.opts.replicas, t.meter, workloadHooks{})
	if err != nil {
		return err
	}
	t.countLogs(logs, "burst", s)
	for k, v := range got {
		s[k] = v
	}
	t.meter.report(s, t.opts.replicas)
	return nil
}

// virtualNodeToleration lets pods onto flotilla's virtual nodes; every mode
// uses the same pod template, and it does nothing where there are none.
var virtualNodeToleration = corev1.Toleration{
	Key: wellknown.ProviderTaintKey, Operator: corev1.TolerationOpEqual, Value: wellknown.ProviderTaintValue,
	Effect: corev1.TaintEffectNoSchedule,
}

// podSpec is the spec of every benchmark pod: one container with small
// requests and the default grace period, as an ordinary workload has. The
// default scheduler spreading places it evenly over nodes (virtual nodes
// in flotilla mode) without a spread constraint only one mode could use.
func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		Tolerations: []corev1.Toleration{virtualNodeToleration},
		Containers: []corev1.Container{{
			Name:  "app",
			Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("1m"),
				corev1.ResourceMemory: resource.MustParse("1Mi"),
			}},
		}},
	}
}

func deployment(name string, replicas int) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()},
		},
	}
}

// watchWorkload watches the pods labelled app=name where the user works
// and, in flotilla mode, in every member (in all namespaces, whatever the
// namespace mapping).
func watchWorkload(ctx context.Context, t *target, name string) (user, members podWatches, err error) {
	selector := "app=" + name
	uw, err := watchPods(ctx, t.user.Client(), t.user.Name, benchNamespace, selector, newNotifier(), time.Now)
	if err != nil {
		return nil, nil, err
	}
	user = podWatches{uw}
	n := newNotifier()
	for _, c := range t.members {
		mw, err := watchPods(ctx, c.Client(), c.Name, metav1.NamespaceAll, selector, n, time.Now)
		if err != nil {
			user.Stop()
			members.Stop()
			return nil, nil, err
		}
		members = append(members, mw)
	}
	return user, members, nil
}

// workloadHooks adapt runDeployment to a scenario; the zero value runs the
// plain Deployment of the burst.
type workloadHooks struct {
	// shape changes the Deployment before it is created.
	shape func(*appsv1.Deployment)
	// started is called as soon as the Deployment is created, while its
	// pods are starting: what runs alongside the workload starts here.
	started func()
	// ready checks the pods once all of them are Ready, where the user
	// works and in the members, before the Deployment is scaled down.
	ready func(user, members podWatches) error
	// loaded is called with the pods forwarded and flotilla-node measured
	// idle with them (after --settle and --idle-window), before the
	// Deployment is scaled down.
	loaded func() error
}

// runDeployment runs one Deployment through create, all Ready, scale to
// zero and all gone, metering both phases when m is not nil, and returns
// the burst metrics.
func runDeployment(ctx context.Context, t *target, name string, replicas int, m *meter, hooks workloadHooks) (sample, error) {
	s := sample{}
	user, members, err := watchWorkload(ctx, t, name)
	if err != nil {
		return nil, err
	}
	defer user.Stop()
	defer members.Stop()
	deployments := t.user.Client().AppsV1().Deployments(benchNamespace)
	defer func() {
		// Clean up even after a failure; pods are already gone on success.
		_ = deployments.Delete(context.Background(), name, metav1.DeleteOptions{})
	}()
	phaseCtx, cancel := context.WithTimeout(ctx, t.opts.phaseTimeout)
	defer cancel()

	if err := m.start(phaseCtx); err != nil {
		return nil, err
	}
	d := deployment(name, replicas)
	if hooks.shape != nil {
		hooks.shape(d)
	}
	t0 := time.Now()
	if _, err := deployments.Create(phaseCtx, d, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create deployment %s in %s: %w", name, t.user.Name, err)
	}
	if hooks.started != nil {
		hooks.started()
	}
	if err := user.waitCount(phaseCtx, "Running and Ready", replicas, isReady); err != nil {
		return nil, err
	}
	if err := members.waitCount(phaseCtx, "Running and Ready", replicas, isReady); err != nil {
		return nil, err
	}
	if hooks.ready != nil {
		if err := hooks.ready(user, members); err != nil {
			return nil, err
		}
	}
	if err := m.settle(phaseCtx, t.opts.settle); err != nil {
		return nil, err
	}
	if err := m.stop(phaseCtx, "create"); err != nil {
		return nil, err
	}
	ready := user.latest(readyAt).Sub(t0)
	s["burst.ready_s"] = seconds(ready)
	s["burst.pods_per_s"] = float64(replicas) / ready.Seconds()
	s["burst.created_s"] = seconds(user.latest(seenAt).Sub(t0))
	s["burst.scheduled_s"] = seconds(user.latest(scheduledAt).Sub(t0))
	startup := latencies(user.times(seenAt), user.times(readyAt))
	s["burst.pod_startup_p50_s"] = percentile(startup, 50)
	s["burst.pod_startup_p99_s"] = percentile(startup, 99)
	if len(members) > 0 {
		s["burst.member_created_s"] = seconds(members.latest(seenAt).Sub(t0))
		s["burst.member_ready_s"] = seconds(members.latest(readyAt).Sub(t0))
		// How long status took to come back: host Ready after member Ready.
		s["burst.status_lag_p50_s"] = percentile(latencies(members.times(readyAt), user.times(readyAt)), 50)
		s["burst.status_lag_p99_s"] = percentile(latencies(members.times(readyAt), user.times(readyAt)), 99)
	}
	for node, n := range user.nodes() {
		s["spread."+node] = float64(n)
	}
	if err := m.memory("loaded", s); err != nil {
		return nil, err
	}
	if err := m.idle(phaseCtx, t.opts.idleWindow, "loaded", s); err != nil {
		return nil, err
	}
	if hooks.loaded != nil {
		if err := hooks.loaded(); err != nil {
			return nil, err
		}
	}

	if err := m.start(phaseCtx); err != nil {
		return nil, err
	}
	t1 := time.Now()
	scale := []byte(`{"spec":{"replicas":0}}`)
	if _, err := deployments.Patch(phaseCtx, name, types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("scale deployment %s in %s to 0: %w", name, t.user.Name, err)
	}
	if err := user.waitCount(phaseCtx, "gone", replicas, isGone); err != nil {
		return nil, err
	}
	if err := members.waitCount(phaseCtx, "gone", replicas, isGone); err != nil {
		return nil, err
	}
	if err := m.settle(phaseCtx, t.opts.settle); err != nil {
		return nil, err
	}
	if err := m.stop(phaseCtx, "delete"); err != nil {
		return nil, err
	}
	s["delete.gone_s"] = seconds(user.latest(goneAt).Sub(t1))
	if len(members) > 0 {
		s["delete.member_gone_s"] = seconds(members.latest(goneAt).Sub(t1))
	}
	if err := m.memory("after", s); err != nil {
		return nil, err
	}
	return s, nil
}

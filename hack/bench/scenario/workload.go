// What the scenarios share: the benchmark pod, its Deployment, and running
// one to Ready and back.

package scenario

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/hack/bench/world"
	"flotilla.io/flotilla/internal/wellknown"
)

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
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: world.BenchNamespace},
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
func watchWorkload(ctx context.Context, t *target, name string) (user, members measure.PodWatches, err error) {
	selector := "app=" + name
	uw, err := measure.WatchPods(ctx, t.User.Client(), t.User.Name, world.BenchNamespace, selector, measure.NewNotifier(), time.Now)
	if err != nil {
		return nil, nil, err
	}
	user = measure.PodWatches{uw}
	n := measure.NewNotifier()
	for _, c := range t.Members {
		mw, err := measure.WatchPods(ctx, c.Client(), c.Name, metav1.NamespaceAll, selector, n, time.Now)
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
	ready func(user, members measure.PodWatches) error
	// loaded is called with the pods forwarded and flotilla-node measured
	// idle with them (after --settle and --idle-window), before the
	// Deployment is scaled down.
	loaded func() error
}

// runDeployment runs one Deployment through create, all Ready, scale to
// zero and all gone, metering both phases when m is not nil, and returns
// the burst metrics.
func runDeployment(ctx context.Context, t *target, name string, replicas int, m *measure.Meter, hooks workloadHooks) (measure.Sample, error) {
	s := measure.Sample{}
	user, members, err := watchWorkload(ctx, t, name)
	if err != nil {
		return nil, err
	}
	defer user.Stop()
	defer members.Stop()
	deployments := t.User.Client().AppsV1().Deployments(world.BenchNamespace)
	defer func() {
		// Clean up even after a failure; pods are already gone on success.
		_ = deployments.Delete(context.Background(), name, metav1.DeleteOptions{})
	}()
	phaseCtx, cancel := context.WithTimeout(ctx, t.opts.PhaseTimeout)
	defer cancel()

	if err := m.Start(phaseCtx); err != nil {
		return nil, err
	}
	d := deployment(name, replicas)
	if hooks.shape != nil {
		hooks.shape(d)
	}
	t0 := time.Now()
	if _, err := deployments.Create(phaseCtx, d, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create deployment %s in %s: %w", name, t.User.Name, err)
	}
	if hooks.started != nil {
		hooks.started()
	}
	if err := user.WaitCount(phaseCtx, "Running and Ready", replicas, measure.IsReady); err != nil {
		return nil, err
	}
	if err := members.WaitCount(phaseCtx, "Running and Ready", replicas, measure.IsReady); err != nil {
		return nil, err
	}
	if hooks.ready != nil {
		if err := hooks.ready(user, members); err != nil {
			return nil, err
		}
	}
	if err := m.Settle(phaseCtx, t.opts.Settle); err != nil {
		return nil, err
	}
	if err := m.Stop(phaseCtx, "create"); err != nil {
		return nil, err
	}
	ready := user.Latest(measure.ReadyAt).Sub(t0)
	s["burst.ready_s"] = measure.Seconds(ready)
	s["burst.pods_per_s"] = float64(replicas) / ready.Seconds()
	s["burst.created_s"] = measure.Seconds(user.Latest(measure.SeenAt).Sub(t0))
	s["burst.scheduled_s"] = measure.Seconds(user.Latest(measure.ScheduledAt).Sub(t0))
	startup := measure.Latencies(user.Times(measure.SeenAt), user.Times(measure.ReadyAt))
	s["burst.pod_startup_p50_s"] = measure.Percentile(startup, 50)
	s["burst.pod_startup_p99_s"] = measure.Percentile(startup, 99)
	if len(members) > 0 {
		s["burst.member_created_s"] = measure.Seconds(members.Latest(measure.SeenAt).Sub(t0))
		s["burst.member_ready_s"] = measure.Seconds(members.Latest(measure.ReadyAt).Sub(t0))
		// How long status took to come back: host Ready after member Ready.
		s["burst.status_lag_p50_s"] = measure.Percentile(measure.Latencies(members.Times(measure.ReadyAt), user.Times(measure.ReadyAt)), 50)
		s["burst.status_lag_p99_s"] = measure.Percentile(measure.Latencies(members.Times(measure.ReadyAt), user.Times(measure.ReadyAt)), 99)
	}
	for node, n := range user.Nodes() {
		s["spread."+node] = float64(n)
	}
	if err := m.Memory("loaded", s); err != nil {
		return nil, err
	}
	if err := m.Idle(phaseCtx, t.opts.IdleWindow, "loaded", s); err != nil {
		return nil, err
	}
	if hooks.loaded != nil {
		if err := hooks.loaded(); err != nil {
			return nil, err
		}
	}

	if err := m.Start(phaseCtx); err != nil {
		return nil, err
	}
	t1 := time.Now()
	scale := []byte(`{"spec":{"replicas":0}}`)
	if _, err := deployments.Patch(phaseCtx, name, types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("scale deployment %s in %s to 0: %w", name, t.User.Name, err)
	}
	if err := user.WaitCount(phaseCtx, "gone", replicas, measure.IsGone); err != nil {
		return nil, err
	}
	if err := members.WaitCount(phaseCtx, "gone", replicas, measure.IsGone); err != nil {
		return nil, err
	}
	if err := m.Settle(phaseCtx, t.opts.Settle); err != nil {
		return nil, err
	}
	if err := m.Stop(phaseCtx, "delete"); err != nil {
		return nil, err
	}
	s["delete.gone_s"] = measure.Seconds(user.Latest(measure.GoneAt).Sub(t1))
	if len(members) > 0 {
		s["delete.member_gone_s"] = measure.Seconds(members.Latest(measure.GoneAt).Sub(t1))
	}
	if err := m.Memory("after", s); err != nil {
		return nil, err
	}
	return s, nil
}

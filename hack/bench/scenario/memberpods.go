// The memberpods scenario: what a member's own pods cost flotilla-node.

package scenario

import (
	"context"
	"fmt"
	"time"

	"flotilla.io/flotilla/hack/bench/measure"

	"flotilla.io/flotilla/hack/bench/world"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// memberPods measures what a member's own pods cost flotilla-node: it
// caches every pod of its member, those it did not forward too, whose
// requests take room on the member's nodes. A Deployment of --member-pods
// pods of member-1's own, with a template as a chart writes one
// (memberPodSpec), runs in the noise namespace (no host namespace maps to
// it) until all are Running and Ready; flotilla-node's RSS is read before
// it and --settle after; then it is scaled to zero until all are gone.
// Opt-in.
type memberPods struct{}

func (memberPods) name() string                { return "memberpods" }
func (memberPods) applies(m measure.Mode) bool { return m == measure.ModeFlotilla }
func (memberPods) peakPods(o *Options) int     { return o.MemberPods }

func (memberPods) run(ctx context.Context, t *target, run int, s measure.Sample) error {
	c := noiseCluster(t)
	if _, err := world.CreateNamespace(ctx, c, noiseNamespace); err != nil {
		return err
	}
	before, err := nodeRSS(t)
	if err != nil {
		return err
	}
	n := t.opts.MemberPods
	var after float64
	_, _, err = ownCycle(ctx, t, c, fmt.Sprintf("member-own-%d", run), n, ownHooks{
		shape: func(d *appsv1.Deployment) {
			d.Spec.Template.Labels["app.kubernetes.io/name"] = "shop-api"
			d.Spec.Template.Labels["app.kubernetes.io/version"] = "2.14.1"
			d.Spec.Template.Annotations = map[string]string{
				"checksum/config":      "4f1c2a9e8d7b6c5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a",
				"prometheus.io/scrape": "true", "prometheus.io/port": "8080",
			}
			d.Spec.Template.Spec = memberPodSpec()
		},
		running: func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(t.opts.Settle): // what trails the last pod, as in the footprint's phases
			}
			var err error
			after, err = nodeRSS(t)
			return err
		},
	})
	if err != nil {
		return err
	}
	s[measure.MemberPodsPrefix+"pods"] = float64(n)
	s[measure.MemberPodsPrefix+"node_rss_before_mib"] = before
	s[measure.MemberPodsPrefix+"node_rss_after_mib"] = after
	s[measure.MemberPodsPrefix+"node_rss_added_mib"] = after - before
	s[measure.MemberPodsPrefix+"node_rss_added_kib_per_pod"] = (after - before) * 1024 / float64(n)
	t.Logf("%s run %d: %d pods of the member's own: flotilla-node RSS %.1f → %.1f MiB", t.Mode, run, n, before, after)
	return nil
}

// memberPodSpec is the pod template of a member's own workload as a chart
// writes it: an application container and a sidecar started as an init
// container, each with env, a port, probes, mounts, requests and limits,
// and a ConfigMap volume (kwok's pods mount nothing). The requests are
// small enough for --member-pods of them on a member's fake nodes.
func memberPodSpec() corev1.PodSpec {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: 3}
	container := func(name, image string, port int32, cpu, mem string) corev1.Container {
		return corev1.Container{
			Name: name, Image: image,
			Env: []corev1.EnvVar{{Name: "SHOP_ENV", Value: "production"}, {Name: "SHOP_REGION", Value: "hangzhou"}, {Name: "LOG_LEVEL", Value: "info"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			Ports:          []corev1.ContainerPort{{Name: name, ContainerPort: port}},
			LivenessProbe:  probe,
			ReadinessProbe: probe,
			VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/shop"}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
			},
		}
	}
	sidecar := container("proxy", "registry.example/mesh/proxy:1.24.3", 15090, "2m", "8Mi")
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return corev1.PodSpec{
		InitContainers: []corev1.Container{sidecar},
		Containers:     []corev1.Container{container("api", "registry.example/shop/api:2.14.1", 8080, "5m", "16Mi")},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "shop-api"}}}}},
	}
}

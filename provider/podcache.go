package provider

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/wellknown"
)

// The informers of a flotilla-node hold every pod it forwards twice: the
// host pod and its member pod. These transforms run on each object before
// an informer stores it and keep only what flotilla reads, so that a
// process forwarding tens of thousands of pods holds as little per pod as
// it can. They are idempotent, as client-go requires, and they never change
// what a reader of the cache sees of the fields it keeps. Nothing writes a
// cached object back: every update starts from a fresh read (UpdatePod,
// release) or from an object flotilla did not forward (takeOver), which
// keeps its whole spec.

// StripManagedFields is the transform of every informer: no reader of a
// flotilla-node cache looks at managed fields, often the largest part of
// an object's metadata.
func StripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// HostPodTransform is the transform of the host pod informers. The host
// pod's spec is what forwarding sends, so it is kept, except for what
// ToMember drops anyway: of the service-account token volume the host's
// admission added (kube-api-access-*), only its token source is kept,
// which is what the pod's dependency on its ServiceAccount is read from,
// and its mounts go.
func HostPodTransform(obj any) (any, error) {
	obj, _ = StripManagedFields(obj)
	if pod, ok := obj.(*corev1.Pod); ok {
		trimTokenVolume(&pod.Spec)
	}
	return obj, nil
}

func trimTokenVolume(s *corev1.PodSpec) {
	trimmed := map[string]bool{}
	for i := range s.Volumes {
		v := &s.Volumes[i]
		if !strings.HasPrefix(v.Name, "kube-api-access-") || v.Projected == nil {
			continue
		}
		trimmed[v.Name] = true
		var keep []corev1.VolumeProjection
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				keep = append(keep, src)
			}
		}
		if len(keep) != len(v.Projected.Sources) {
			v.Projected = &corev1.ProjectedVolumeSource{Sources: keep, DefaultMode: v.Projected.DefaultMode}
		}
	}
	if len(trimmed) == 0 {
		return
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = dropMounts(cs[i].VolumeMounts, trimmed)
		}
	}
}

func dropMounts(ms []corev1.VolumeMount, drop map[string]bool) []corev1.VolumeMount {
	n := 0
	for _, m := range ms {
		if drop[m.Name] {
			n++
		}
	}
	if n == 0 {
		return ms
	}
	out := make([]corev1.VolumeMount, 0, len(ms)-n)
	for _, m := range ms {
		if !drop[m.Name] {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// MemberPodTransform is the transform of the member pod informer of an
// installation. A member pod of another owner keeps its spec: flotilla
// may adopt it, and an adoption writes it back. A pod the installation
// forwarded keeps, of its spec, only what flotilla reads of it:
//   - the node it runs on and the requests it holds there (containers'
//     and init containers' resources and restart policies, the pod's
//     overhead and resources), for the fit model;
//   - the fields a host pod may change after creation (container images,
//     active deadline, tolerations), for HostView;
//   - container names, for stats, and the restart policy;
//   - the references to the objects it uses (ServiceAccount, pull secrets,
//     Secret and ConfigMap references in env, envFrom and volumes), for
//     the dependency index.
//
// Everything else (mounts, probes, commands, security contexts, scheduling
// terms, plain env values) is dropped.
func MemberPodTransform(installation string) cache.TransformFunc {
	return func(obj any) (any, error) {
		obj, _ = StripManagedFields(obj)
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Labels[wellknown.InstallationLabel] != installation || pod.Labels[wellknown.ClusterLabel] == "" {
			return obj, nil
		}
		s := &pod.Spec
		pod.Spec = corev1.PodSpec{
			Volumes:               referenceVolumes(s.Volumes),
			InitContainers:        readContainers(s.InitContainers),
			Containers:            readContainers(s.Containers),
			EphemeralContainers:   readEphemeralContainers(s.EphemeralContainers),
			RestartPolicy:         s.RestartPolicy,
			ActiveDeadlineSeconds: s.ActiveDeadlineSeconds,
			ServiceAccountName:    s.ServiceAccountName,
			NodeName:              s.NodeName,
			ImagePullSecrets:      s.ImagePullSecrets,
			Tolerations:           s.Tolerations,
			Priority:              s.Priority,
			PriorityClassName:     s.PriorityClassName,
			Overhead:              s.Overhead,
			Resources:             s.Resources,
		}
		return pod, nil
	}
}

func readContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{
			Name:          c.Name,
			Image:         c.Image,
			Resources:     c.Resources,
			RestartPolicy: c.RestartPolicy,
			EnvFrom:       c.EnvFrom,
			Env:           referenceEnv(c.Env),
		}
	}
	return out
}

func readEphemeralContainers(cs []corev1.EphemeralContainer) []corev1.EphemeralContainer {
	if cs == nil {
		return nil
	}
	out := make([]corev1.EphemeralContainer, len(cs))
	for i, c := range cs {
		out[i].Name, out[i].Image = c.Name, c.Image
	}
	return out
}

// referenceEnv keeps the variables that name a Secret or a ConfigMap.
func referenceEnv(env []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if f := e.ValueFrom; f != nil && (f.SecretKeyRef != nil || f.ConfigMapKeyRef != nil) {
			out = append(out, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: f.SecretKeyRef, ConfigMapKeyRef: f.ConfigMapKeyRef}})
		}
	}
	return out
}

// referenceVolumes keeps the volumes that name a Secret, a ConfigMap or
// the ServiceAccount's token, without their items.
func referenceVolumes(vs []corev1.Volume) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range vs {
		var src corev1.VolumeSource
		switch {
		case v.Secret != nil:
			src.Secret = &corev1.SecretVolumeSource{SecretName: v.Secret.SecretName, Optional: v.Secret.Optional}
		case v.ConfigMap != nil:
			src.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: v.ConfigMap.LocalObjectReference, Optional: v.ConfigMap.Optional}
		case v.Projected != nil:
			var sources []corev1.VolumeProjection
			for _, p := range v.Projected.Sources {
				switch {
				case p.Secret != nil:
					sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: p.Secret.LocalObjectReference, Optional: p.Secret.Optional}})
				case p.ConfigMap != nil:
					sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: p.ConfigMap.LocalObjectReference, Optional: p.ConfigMap.Optional}})
				case p.ServiceAccountToken != nil:
					sources = append(sources, corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{}})
				}
			}
			if sources == nil {
				continue
			}
			src.Projected = &corev1.ProjectedVolumeSource{Sources: sources}
		default:
			if volumePluginSecret(v.VolumeSource) == "" {
				continue
			}
			src = v.VolumeSource
		}
		out = append(out, corev1.Volume{Name: v.Name, VolumeSource: src})
	}
	return out
}

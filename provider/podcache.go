package provider

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/podspec"
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

// trimTokenVolume trims in place: the transforms run on every event of
// every pod, so they allocate nothing.
func trimTokenVolume(s *corev1.PodSpec) {
	found := false
	for i := range s.Volumes {
		v := &s.Volumes[i]
		if !podspec.IsServiceAccountToken(v) {
			continue
		}
		found = true
		v.Projected.Sources = keepIn(v.Projected.Sources, func(p *corev1.VolumeProjection) bool { return p.ServiceAccountToken != nil })
	}
	if !found {
		return
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = keepIn(cs[i].VolumeMounts, func(m *corev1.VolumeMount) bool {
				return !slices.ContainsFunc(s.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name && podspec.IsServiceAccountToken(&v) })
			})
		}
	}
}

// keepIn keeps the elements of xs for which keep holds, in place; the rest
// of the array is cleared so that it holds on to nothing. Nil for none.
func keepIn[T any](xs []T, keep func(*T) bool) []T {
	n := 0
	for i := range xs {
		if keep(&xs[i]) {
			xs[n] = xs[i]
			n++
		}
	}
	clear(xs[n:])
	if n == 0 {
		return nil
	}
	return xs[:n]
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
		*s = corev1.PodSpec{
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

// The functions below trim in place, allocating nothing.

func readContainers(cs []corev1.Container) []corev1.Container {
	for i := range cs {
		c := &cs[i]
		*c = corev1.Container{
			Name:          c.Name,
			Image:         c.Image,
			Resources:     c.Resources,
			RestartPolicy: c.RestartPolicy,
			EnvFrom:       c.EnvFrom,
			Env:           referenceEnv(c.Env),
		}
	}
	return cs
}

func readEphemeralContainers(cs []corev1.EphemeralContainer) []corev1.EphemeralContainer {
	for i := range cs {
		c := &cs[i]
		*c = corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Image: c.Image}}
	}
	return cs
}

// referenceEnv keeps the variables that name a Secret or a ConfigMap.
func referenceEnv(env []corev1.EnvVar) []corev1.EnvVar {
	return keepIn(env, func(e *corev1.EnvVar) bool {
		f := e.ValueFrom
		e.Value = ""
		return f != nil && (f.SecretKeyRef != nil || f.ConfigMapKeyRef != nil)
	})
}

// referenceVolumes keeps the volumes that name a Secret, a ConfigMap or
// the ServiceAccount's token, without their items.
func referenceVolumes(vs []corev1.Volume) []corev1.Volume {
	return keepIn(vs, func(v *corev1.Volume) bool {
		switch {
		case v.Secret != nil:
			v.VolumeSource = corev1.VolumeSource{Secret: v.Secret}
			v.Secret.Items, v.Secret.DefaultMode = nil, nil
		case v.ConfigMap != nil:
			v.VolumeSource = corev1.VolumeSource{ConfigMap: v.ConfigMap}
			v.ConfigMap.Items, v.ConfigMap.DefaultMode = nil, nil
		case v.Projected != nil:
			v.VolumeSource = corev1.VolumeSource{Projected: v.Projected}
			v.Projected.DefaultMode = nil
			v.Projected.Sources = keepIn(v.Projected.Sources, func(p *corev1.VolumeProjection) bool {
				switch {
				case p.Secret != nil:
					p.Secret.Items = nil
					*p = corev1.VolumeProjection{Secret: p.Secret}
				case p.ConfigMap != nil:
					p.ConfigMap.Items = nil
					*p = corev1.VolumeProjection{ConfigMap: p.ConfigMap}
				case p.ServiceAccountToken != nil:
					*p.ServiceAccountToken = corev1.ServiceAccountTokenProjection{}
					*p = corev1.VolumeProjection{ServiceAccountToken: p.ServiceAccountToken}
				default:
					return false
				}
				return true
			})
			return v.Projected.Sources != nil
		default:
			return volumePluginSecret(v.VolumeSource) != ""
		}
		return true
	})
}

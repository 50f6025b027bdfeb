// Package podspec holds what flotilla does to a pod spec that moves from one
// cluster to another: between a host pod and its member pod, in either
// direction.
package podspec

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// IsServiceAccountToken reports whether v is the token volume a cluster's
// ServiceAccount admission adds.
func IsServiceAccountToken(v *corev1.Volume) bool {
	return v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-")
}

// DropServiceAccountToken removes the projected token volume that a
// cluster's ServiceAccount admission added (kube-api-access-*), and its
// mounts, so that the pod can be created in another cluster, whose
// admission adds its own.
func DropServiceAccountToken(s *corev1.PodSpec) {
	drop := map[string]bool{}
	var vols []corev1.Volume
	for _, v := range s.Volumes {
		if IsServiceAccountToken(&v) {
			drop[v.Name] = true
			continue
		}
		vols = append(vols, v)
	}
	if len(drop) == 0 {
		return
	}
	s.Volumes = vols
	keep := func(ms []corev1.VolumeMount) []corev1.VolumeMount {
		var out []corev1.VolumeMount
		for _, m := range ms {
			if !drop[m.Name] {
				out = append(out, m)
			}
		}
		return out
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = keep(cs[i].VolumeMounts)
		}
	}
	// A debugging container may mount the token as any container may.
	for i := range s.EphemeralContainers {
		s.EphemeralContainers[i].VolumeMounts = keep(s.EphemeralContainers[i].VolumeMounts)
	}
}

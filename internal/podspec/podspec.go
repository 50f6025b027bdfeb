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
	strip := func(cs []corev1.Container) {
		for i := range cs {
			var mounts []corev1.VolumeMount
			for _, m := range cs[i].VolumeMounts {
				if !drop[m.Name] {
					mounts = append(mounts, m)
				}
			}
			cs[i].VolumeMounts = mounts
		}
	}
	strip(s.InitContainers)
	strip(s.Containers)
}

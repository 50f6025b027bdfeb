package fit

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodRequests is what a pod requests of its node, as the scheduler counts
// it: containers, init containers (sidecars included), overhead and
// pod-level resources.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
}

// ListKey names a resource list by its contents: names in order, each
// with its quantity in canonical form. Equal lists, however their
// quantities were written, have the same key.
func ListKey(l corev1.ResourceList) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		b.WriteString(string(name))
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(',')
	}
	return b.String()
}

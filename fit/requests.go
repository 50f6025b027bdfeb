package fit

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodRequests is what a pod requests of its node, as the scheduler counts
// it: containers, init containers (sidecars included), overhead and
// pod-level resources.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
}

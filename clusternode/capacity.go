package clusternode

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/podstate"
)

// Eligible reports whether a member node contributes capacity to the virtual
// node: it must match the slice's selector, be Ready and accept new pods.
func Eligible(n *corev1.Node, selector labels.Selector) bool {
	if n.Spec.Unschedulable {
		return false
	}
	if selector != nil && !selector.Matches(labels.Set(n.Labels)) {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Allocatable is what the host scheduler may place on the virtual node: the
// sum of the allocatable resources of the eligible member nodes, minus the
// requests of the pods bound to them that flotilla did not forward. Each
// such pod also uses up one unit of the "pods" resource. Nothing goes below zero.
func Allocatable(nodes []*corev1.Node, pods []*corev1.Pod, selector labels.Selector, forwarded func(*corev1.Pod) bool) corev1.ResourceList {
	return allocatable(eligibleNodes(nodes, selector), pods, forwarded, fit.PodRequests)
}

// eligibleNodes returns the nodes that are Eligible.
func eligibleNodes(nodes []*corev1.Node, selector labels.Selector) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range nodes {
		if Eligible(n, selector) {
			out = append(out, n)
		}
	}
	return out
}

// allocatable is Allocatable over nodes already known to be eligible.
func allocatable(nodes []*corev1.Node, pods []*corev1.Pod, forwarded func(*corev1.Pod) bool, requests fit.Requests) corev1.ResourceList {
	total := corev1.ResourceList{}
	eligible := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		eligible[n.Name] = true
		for name, q := range n.Status.Allocatable {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	for _, p := range pods {
		if !eligible[p.Spec.NodeName] || forwarded(p) || podstate.Terminal(p) {
			continue
		}
		for name, q := range requests(p) {
			if sum, ok := total[name]; ok {
				sum.Sub(q)
				total[name] = sum
			}
		}
		if sum, ok := total[corev1.ResourcePods]; ok {
			sum.Sub(*resource.NewQuantity(1, resource.DecimalSI))
			total[corev1.ResourcePods] = sum
		}
	}
	for name, q := range total {
		if q.Sign() < 0 {
			total[name] = *resource.NewQuantity(0, q.Format)
		}
	}
	return total
}

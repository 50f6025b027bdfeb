package clusternode

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/wellknown"
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

// Allocatable is what the host scheduler may place on the virtual node of
// owner: the sum of the allocatable resources of the eligible member nodes,
// minus the requests of the pods bound to them that owner did not forward.
// Each such pod also uses up one unit of the "pods" resource. Nothing goes
// below zero.
func Allocatable(nodes []*corev1.Node, pods []*corev1.Pod, selector labels.Selector, owner wellknown.Owner) corev1.ResourceList {
	eligible := eligibleNodes(nodes, selector)
	_, others := usedOn(eligible, fit.UsageOf(pods, ownerKey), keyOf(owner))
	return allocatable(eligible, others)
}

// ownerKey names the virtual node that forwarded a member pod, as
// wellknown.Owner.Owns tells it: the group of a member's fit.Usage.
func ownerKey(o metav1.Object) string {
	l := o.GetLabels()
	return keyOf(wellknown.Owner{Cluster: l[wellknown.ClusterLabel], Installation: l[wellknown.InstallationLabel]})
}

// keyOf is ownerKey of the pods o owns.
func keyOf(o wellknown.Owner) string {
	if o.Cluster == "" && o.Installation == "" {
		return ""
	}
	return o.Cluster + "\x00" + o.Installation
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

// usedOn returns, for each of nodes, what the pods on it request: all of
// them, and those that owner did not forward.
func usedOn(nodes []*corev1.Node, u *fit.Usage, owner string) (all, others map[string]fit.Use) {
	all = make(map[string]fit.Use, len(nodes))
	others = make(map[string]fit.Use, len(nodes))
	for _, n := range nodes {
		a, mine := u.Of(n.Name, owner)
		o := maps.Clone(a)
		for name, v := range mine {
			o[name] -= v
		}
		all[n.Name], others[n.Name] = a, o
	}
	return all, others
}

// allocatable is Allocatable over nodes already known to be eligible,
// given what the pods on each request that the host scheduler does not
// count.
func allocatable(nodes []*corev1.Node, others map[string]fit.Use) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, n := range nodes {
		for name, q := range n.Status.Allocatable {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	for _, n := range nodes {
		for name, v := range others[n.Name] {
			if sum, ok := total[name]; ok {
				sum.Sub(quantityOf(name, v))
				total[name] = sum
			}
		}
	}
	for name, q := range total {
		if q.Sign() < 0 {
			total[name] = *resource.NewQuantity(0, q.Format)
		}
	}
	return total
}

// quantityOf is v, in fit's unit for name, as a quantity.
func quantityOf(name corev1.ResourceName, v int64) resource.Quantity {
	if name == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, resource.DecimalSI)
}

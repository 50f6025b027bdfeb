package policyctl

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/propagation"
)

// isVirtualNode reports whether node is a flotilla cluster.
func isVirtualNode(node *corev1.Node) bool {
	return node.Labels[wellknown.TypeLabel] == wellknown.TypeValue && node.Labels[wellknown.ClusterLabel] != ""
}

// clusterViews is propagation's view of the virtual nodes: labels, taints
// other than the virtual-node taint (placed pods always tolerate that),
// whether new replicas may go there (Ready and not cordoned), and what is
// left of their allocatable after the pods bound to them — except the
// pods of template own, whose replicas are being placed again — and, from
// the fit model each publishes, how many replicas of pod spec its member
// nodes can hold.
func clusterViews(nodes []corev1.Node, pods []corev1.Pod, own types.UID, spec *corev1.PodSpec) []propagation.Cluster {
	used := map[string]corev1.ResourceList{}
	ownBound := map[string]int64{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || podstate.Leaving(p) {
			continue
		}
		if own != "" && types.UID(p.Annotations[wellknown.TemplateAnnotation]) == own {
			ownBound[p.Spec.NodeName]++
			continue
		}
		r := used[p.Spec.NodeName]
		if r == nil {
			r = corev1.ResourceList{}
			used[p.Spec.NodeName] = r
		}
		addResources(r, podRequests(&p.Spec))
	}
	var out []propagation.Cluster
	for i := range nodes {
		n := &nodes[i]
		if !isVirtualNode(n) {
			continue
		}
		c := propagation.Cluster{Name: n.Name, Labels: n.Labels, Ready: podstate.NodeReady(n) && !n.Spec.Unschedulable, Available: corev1.ResourceList{}}
		for _, t := range n.Spec.Taints {
			if t.Key != wellknown.ProviderTaintKey {
				c.Taints = append(c.Taints, t)
			}
		}
		for name, q := range n.Status.Allocatable {
			q = q.DeepCopy()
			if u, ok := used[n.Name][name]; ok {
				q.Sub(u)
			}
			if q.Sign() < 0 {
				q = resource.Quantity{}
			}
			c.Available[name] = q
		}
		if spec != nil {
			// The model counts the workload's own replicas where they
			// run; each can take its place again.
			if fc, err := fit.NewCluster(n); err == nil {
				if holds, known := fc.Replicas(fit.DemandOf(&corev1.Pod{Spec: *spec})); known {
					c.Holds = ptr.To(holds + ownBound[n.Name])
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// podRequests is what one pod asks of a node, as the scheduler counts it,
// plus one "pods" slot.
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	r := resourcehelper.PodRequests(&corev1.Pod{Spec: *spec}, resourcehelper.PodResourcesOptions{})
	r[corev1.ResourcePods] = resource.MustParse("1")
	return r
}

func addResources(into, r corev1.ResourceList) {
	for name, q := range r {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}

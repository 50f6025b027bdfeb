// Nodes: member nodes as flotilla-node reads them and virtual nodes as
// the host sees them.
package builder

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/wellknown"
)

// NodeWrapper builds a node.
type NodeWrapper struct {
	meta[*NodeWrapper]
	node corev1.Node
}

// Node starts a node named name.
func Node(name string) *NodeWrapper {
	w := &NodeWrapper{node: corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	w.meta = meta[*NodeWrapper]{om: &w.node.ObjectMeta, self: w}
	return w
}

// VirtualNode starts a node labelled as flotilla-node labels the virtual
// node of cluster name.
func VirtualNode(name string) *NodeWrapper {
	return Node(name).Label(wellknown.TypeLabel, wellknown.TypeValue).Label(wellknown.ClusterLabel, name)
}

// Obj returns the node built.
func (w *NodeWrapper) Obj() *corev1.Node { return &w.node }

// Hostname sets the hostname label to the node's name, as a kubelet does.
func (w *NodeWrapper) Hostname() *NodeWrapper {
	return w.Label(wellknown.HostnameLabel, w.node.Name)
}

// Allocatable sets the allocatable amount of resource name to q.
func (w *NodeWrapper) Allocatable(name corev1.ResourceName, q string) *NodeWrapper {
	if w.node.Status.Allocatable == nil {
		w.node.Status.Allocatable = corev1.ResourceList{}
	}
	w.node.Status.Allocatable[name] = resource.MustParse(q)
	return w
}

// CPU sets the allocatable cpu.
func (w *NodeWrapper) CPU(q string) *NodeWrapper { return w.Allocatable(corev1.ResourceCPU, q) }

// Memory sets the allocatable memory.
func (w *NodeWrapper) Memory(q string) *NodeWrapper { return w.Allocatable(corev1.ResourceMemory, q) }

// Pods sets how many pods the node holds.
func (w *NodeWrapper) Pods(q string) *NodeWrapper { return w.Allocatable(corev1.ResourcePods, q) }

// Ready sets the Ready condition to True.
func (w *NodeWrapper) Ready() *NodeWrapper { return w.ready(corev1.ConditionTrue) }

// NotReady sets the Ready condition to False.
func (w *NodeWrapper) NotReady() *NodeWrapper { return w.ready(corev1.ConditionFalse) }

func (w *NodeWrapper) ready(status corev1.ConditionStatus) *NodeWrapper {
	for i := range w.node.Status.Conditions {
		if w.node.Status.Conditions[i].Type == corev1.NodeReady {
			w.node.Status.Conditions[i].Status = status
			return w
		}
	}
	w.node.Status.Conditions = append(w.node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: status})
	return w
}

// Unschedulable cordons the node.
func (w *NodeWrapper) Unschedulable() *NodeWrapper {
	w.node.Spec.Unschedulable = true
	return w
}

// Taint adds the taint key=value:effect.
func (w *NodeWrapper) Taint(key, value string, effect corev1.TaintEffect) *NodeWrapper {
	w.node.Spec.Taints = append(w.node.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// Declares sets the features the node declares (node.status.declaredFeatures),
// as a kubelet of Kubernetes 1.36 or later publishes them.
func (w *NodeWrapper) Declares(features ...string) *NodeWrapper {
	w.node.Status.DeclaredFeatures = features
	return w
}

// Pods, with the fields placement, capacity and forwarding tests read.
package builder

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodWrapper builds a pod.
type PodWrapper struct {
	meta[*PodWrapper]
	pod corev1.Pod
}

// Pod starts a pod named name (empty for a pod whose name no test reads).
func Pod(name string) *PodWrapper {
	w := &PodWrapper{pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	w.meta = meta[*PodWrapper]{om: &w.pod.ObjectMeta, self: w}
	return w
}

// Obj returns the pod built.
func (w *PodWrapper) Obj() *corev1.Pod { return &w.pod }

// Node binds the pod to node.
func (w *PodWrapper) Node(node string) *PodWrapper {
	w.pod.Spec.NodeName = node
	return w
}

// Container adds a container named name; Image and the requests apply to
// the container added last.
func (w *PodWrapper) Container(name string) *PodWrapper {
	w.pod.Spec.Containers = append(w.pod.Spec.Containers, corev1.Container{Name: name})
	return w
}

// last is the container added last, a container named "c" if there is none.
func (w *PodWrapper) last() *corev1.Container {
	if len(w.pod.Spec.Containers) == 0 {
		w.Container("c")
	}
	return &w.pod.Spec.Containers[len(w.pod.Spec.Containers)-1]
}

// Image sets the last container's image.
func (w *PodWrapper) Image(image string) *PodWrapper {
	w.last().Image = image
	return w
}

// Request sets the last container's request of resource name to q.
func (w *PodWrapper) Request(name corev1.ResourceName, q string) *PodWrapper {
	c := w.last()
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[name] = resource.MustParse(q)
	return w
}

// CPU sets the last container's cpu request.
func (w *PodWrapper) CPU(q string) *PodWrapper { return w.Request(corev1.ResourceCPU, q) }

// Memory sets the last container's memory request.
func (w *PodWrapper) Memory(q string) *PodWrapper { return w.Request(corev1.ResourceMemory, q) }

// RestartAllContainersOnExit makes the last container restart all of the
// pod's containers when it exits with code (restartPolicyRules), which
// only nodes that declare RestartAllContainersOnContainerExits run.
func (w *PodWrapper) RestartAllContainersOnExit(code int32) *PodWrapper {
	c := w.last()
	never := corev1.ContainerRestartPolicyNever
	c.RestartPolicy = &never
	c.RestartPolicyRules = append(c.RestartPolicyRules, corev1.ContainerRestartRule{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{code}},
	})
	return w
}

// NodeSelector adds k=v to the node selector.
func (w *PodWrapper) NodeSelector(k, v string) *PodWrapper {
	if w.pod.Spec.NodeSelector == nil {
		w.pod.Spec.NodeSelector = map[string]string{}
	}
	w.pod.Spec.NodeSelector[k] = v
	return w
}

// nodeAffinity is the pod's node affinity, added if it has none.
func (w *PodWrapper) nodeAffinity() *corev1.NodeAffinity {
	if w.pod.Spec.Affinity == nil {
		w.pod.Spec.Affinity = &corev1.Affinity{}
	}
	if w.pod.Spec.Affinity.NodeAffinity == nil {
		w.pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	return w.pod.Spec.Affinity.NodeAffinity
}

// RequiredNodeAffinity adds a required node selector term of exprs.
func (w *PodWrapper) RequiredNodeAffinity(exprs ...corev1.NodeSelectorRequirement) *PodWrapper {
	a := w.nodeAffinity()
	if a.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		a.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	sel := a.RequiredDuringSchedulingIgnoredDuringExecution
	sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
	return w
}

// PreferredNodeAffinity adds a preferred node selector term of exprs with weight.
func (w *PodWrapper) PreferredNodeAffinity(weight int32, exprs ...corev1.NodeSelectorRequirement) *PodWrapper {
	a := w.nodeAffinity()
	a.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	return w
}

// Tolerate adds a toleration of every taint with key.
func (w *PodWrapper) Tolerate(key string) *PodWrapper {
	w.pod.Spec.Tolerations = append(w.pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	return w
}

// Claim adds a volume named volume of the persistent volume claim claim.
func (w *PodWrapper) Claim(volume, claim string) *PodWrapper {
	w.pod.Spec.Volumes = append(w.pod.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	return w
}

// Phase sets the phase.
func (w *PodWrapper) Phase(p corev1.PodPhase) *PodWrapper {
	w.pod.Status.Phase = p
	return w
}

// Condition sets the status of the condition of type typ, adding it if the
// pod has none.
func (w *PodWrapper) Condition(typ corev1.PodConditionType, status corev1.ConditionStatus) *PodWrapper {
	for i := range w.pod.Status.Conditions {
		if w.pod.Status.Conditions[i].Type == typ {
			w.pod.Status.Conditions[i].Status = status
			return w
		}
	}
	w.pod.Status.Conditions = append(w.pod.Status.Conditions, corev1.PodCondition{Type: typ, Status: status})
	return w
}

// Started sets the time the kubelet started the pod.
func (w *PodWrapper) Started(t time.Time) *PodWrapper {
	w.pod.Status.StartTime = &metav1.Time{Time: t}
	return w
}

// Priority sets the priority class's name and the priority the apiserver
// resolved from it.
func (w *PodWrapper) Priority(class string, value int32) *PodWrapper {
	w.pod.Spec.PriorityClassName = class
	w.pod.Spec.Priority = &value
	return w
}

// NeverPreempt sets the preemption policy Never.
func (w *PodWrapper) NeverPreempt() *PodWrapper {
	never := corev1.PreemptNever
	w.pod.Spec.PreemptionPolicy = &never
	return w
}

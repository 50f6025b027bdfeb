// Package podstate answers the questions about a pod's or node's state that
// every flotilla component asks the same way: has the pod finished, is it
// Ready, is the node Ready.
package podstate

import corev1 "k8s.io/api/core/v1"

// Terminal reports whether the pod's containers have finished for good:
// phase Succeeded or Failed.
func Terminal(p *corev1.Pod) bool {
	return TerminalPhase(p.Status.Phase)
}

// TerminalPhase reports whether a pod in phase has finished for good:
// Succeeded or Failed.
func TerminalPhase(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

// Leaving reports whether the pod is finished or being deleted: it will not
// run (again) where it is.
func Leaving(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || Terminal(p)
}

// Ready reports whether the pod's Ready condition is True.
func Ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

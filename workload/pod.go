package workload

import (
	corev1 "k8s.io/api/core/v1"
)

// pod places a bare Pod: itself, once. It has no pod template (its paths
// are its own) and no per-cluster copy.
type pod struct{ templated }

func newPod() pod {
	return pod{templated{corev1.SchemeGroupVersion.WithKind("Pod"), "pods", ""}}
}

func (pod) New() Object           { return &corev1.Pod{} }
func (pod) NewList() List         { return &corev1.PodList{} }
func (pod) Items(l List) []Object { return items(l.(*corev1.PodList).Items) }

func (pod) Pods(obj Object) (int32, *corev1.PodSpec) { return 1, &obj.(*corev1.Pod).Spec }

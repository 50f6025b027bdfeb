package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// statefulSet places StatefulSets: spec.replicas pods of spec.template.
type statefulSet struct{ templated }

var _ Deriver = statefulSet{}

func newStatefulSet() statefulSet {
	return statefulSet{templated{appsv1.SchemeGroupVersion.WithKind("StatefulSet"), "statefulsets", "/spec/template"}}
}

func (statefulSet) New() Object           { return &appsv1.StatefulSet{} }
func (statefulSet) NewList() List         { return &appsv1.StatefulSetList{} }
func (statefulSet) Items(l List) []Object { return items(l.(*appsv1.StatefulSetList).Items) }

func (statefulSet) Pods(obj Object) (int32, *corev1.PodSpec) {
	s := obj.(*appsv1.StatefulSet)
	return replicas(s.Spec.Replicas), &s.Spec.Template.Spec
}

func (statefulSet) CopySpec(dst, src Object, _ bool) bool {
	return setSpec(&dst.(*appsv1.StatefulSet).Spec, src.(*appsv1.StatefulSet).Spec)
}

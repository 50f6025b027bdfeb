package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// replicaSet places ReplicaSets: spec.replicas pods of spec.template.
type replicaSet struct{ templated }

var _ Deriver = replicaSet{}

func newReplicaSet() replicaSet {
	return replicaSet{templated{appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), "replicasets", "/spec/template"}}
}

func (replicaSet) New() Object           { return &appsv1.ReplicaSet{} }
func (replicaSet) NewList() List         { return &appsv1.ReplicaSetList{} }
func (replicaSet) Items(l List) []Object { return items(l.(*appsv1.ReplicaSetList).Items) }

func (replicaSet) Pods(obj Object) (int32, *corev1.PodSpec) {
	r := obj.(*appsv1.ReplicaSet)
	return replicas(r.Spec.Replicas), &r.Spec.Template.Spec
}

func (replicaSet) CopySpec(dst, src Object, _ bool) bool {
	return setSpec(&dst.(*appsv1.ReplicaSet).Spec, src.(*appsv1.ReplicaSet).Spec)
}

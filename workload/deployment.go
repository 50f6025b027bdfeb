package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// deployment places Deployments: spec.replicas pods of spec.template.
type deployment struct{ templated }

var _ Deriver = deployment{}

func newDeployment() deployment {
	return deployment{templated{appsv1.SchemeGroupVersion.WithKind("Deployment"), "deployments", "/spec/template"}}
}

func (deployment) New() Object           { return &appsv1.Deployment{} }
func (deployment) NewList() List         { return &appsv1.DeploymentList{} }
func (deployment) Items(l List) []Object { return items(l.(*appsv1.DeploymentList).Items) }

func (deployment) Pods(obj Object) (int32, *corev1.PodSpec) {
	d := obj.(*appsv1.Deployment)
	return replicas(d.Spec.Replicas), &d.Spec.Template.Spec
}

func (deployment) CopySpec(dst, src Object, _ bool) bool {
	return setSpec(&dst.(*appsv1.Deployment).Spec, src.(*appsv1.Deployment).Spec)
}

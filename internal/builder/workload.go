// Workload templates and the ReplicaSets between a Deployment and its pods.
package builder

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DeploymentWrapper builds a Deployment.
type DeploymentWrapper struct {
	meta[*DeploymentWrapper]
	d appsv1.Deployment
}

// Deployment starts a Deployment named name.
func Deployment(name string) *DeploymentWrapper {
	w := &DeploymentWrapper{d: appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	w.meta = meta[*DeploymentWrapper]{om: &w.d.ObjectMeta, self: w}
	return w
}

// Obj returns the Deployment built.
func (w *DeploymentWrapper) Obj() *appsv1.Deployment { return &w.d }

// Replicas sets the replicas wanted.
func (w *DeploymentWrapper) Replicas(n int32) *DeploymentWrapper {
	w.d.Spec.Replicas = ptr.To(n)
	return w
}

// Paused sets whether the rollout is paused.
func (w *DeploymentWrapper) Paused(paused bool) *DeploymentWrapper {
	w.d.Spec.Paused = paused
	return w
}

// Template sets the spec of the pods the Deployment makes.
func (w *DeploymentWrapper) Template(spec corev1.PodSpec) *DeploymentWrapper {
	w.d.Spec.Template.Spec = spec
	return w
}

// Status sets the status its controller reported.
func (w *DeploymentWrapper) Status(s appsv1.DeploymentStatus) *DeploymentWrapper {
	w.d.Status = s
	return w
}

// StatefulSetWrapper builds a StatefulSet.
type StatefulSetWrapper struct {
	meta[*StatefulSetWrapper]
	s appsv1.StatefulSet
}

// StatefulSet starts a StatefulSet named name.
func StatefulSet(name string) *StatefulSetWrapper {
	w := &StatefulSetWrapper{s: appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	w.meta = meta[*StatefulSetWrapper]{om: &w.s.ObjectMeta, self: w}
	return w
}

// Obj returns the StatefulSet built.
func (w *StatefulSetWrapper) Obj() *appsv1.StatefulSet { return &w.s }

// Replicas sets the replicas wanted.
func (w *StatefulSetWrapper) Replicas(n int32) *StatefulSetWrapper {
	w.s.Spec.Replicas = ptr.To(n)
	return w
}

// Status sets the status its controller reported.
func (w *StatefulSetWrapper) Status(s appsv1.StatefulSetStatus) *StatefulSetWrapper {
	w.s.Status = s
	return w
}

// ReplicaSetWrapper builds a ReplicaSet.
type ReplicaSetWrapper struct {
	meta[*ReplicaSetWrapper]
	rs appsv1.ReplicaSet
}

// ReplicaSet starts a ReplicaSet named name; ControlledBy names its
// Deployment.
func ReplicaSet(name string) *ReplicaSetWrapper {
	w := &ReplicaSetWrapper{rs: appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	w.meta = meta[*ReplicaSetWrapper]{om: &w.rs.ObjectMeta, self: w}
	return w
}

// Obj returns the ReplicaSet built.
func (w *ReplicaSetWrapper) Obj() *appsv1.ReplicaSet { return &w.rs }

package policyctl

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// templateKind is a kind of workload template a policy can place.
type templateKind struct {
	apiVersion, kind string
	newObj           func() client.Object
	newList          func() client.ObjectList
	items            func(client.ObjectList) []client.Object
	// workload gives the replicas to place and the pod spec they run.
	workload func(client.Object) (int32, *corev1.PodSpec)
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// templateKinds are the kinds whose pods policies place, by kind.
var templateKinds = map[string]templateKind{
	"Deployment": {"apps/v1", "Deployment",
		func() client.Object { return &appsv1.Deployment{} }, func() client.ObjectList { return &appsv1.DeploymentList{} },
		func(l client.ObjectList) []client.Object { return objects(l.(*appsv1.DeploymentList).Items) },
		func(o client.Object) (int32, *corev1.PodSpec) {
			d := o.(*appsv1.Deployment)
			return replicas(d.Spec.Replicas), &d.Spec.Template.Spec
		}},
	"StatefulSet": {"apps/v1", "StatefulSet",
		func() client.Object { return &appsv1.StatefulSet{} }, func() client.ObjectList { return &appsv1.StatefulSetList{} },
		func(l client.ObjectList) []client.Object { return objects(l.(*appsv1.StatefulSetList).Items) },
		func(o client.Object) (int32, *corev1.PodSpec) {
			s := o.(*appsv1.StatefulSet)
			return replicas(s.Spec.Replicas), &s.Spec.Template.Spec
		}},
	"ReplicaSet": {"apps/v1", "ReplicaSet",
		func() client.Object { return &appsv1.ReplicaSet{} }, func() client.ObjectList { return &appsv1.ReplicaSetList{} },
		func(l client.ObjectList) []client.Object { return objects(l.(*appsv1.ReplicaSetList).Items) },
		func(o client.Object) (int32, *corev1.PodSpec) {
			r := o.(*appsv1.ReplicaSet)
			return replicas(r.Spec.Replicas), &r.Spec.Template.Spec
		}},
	"Job": {"batch/v1", "Job",
		func() client.Object { return &batchv1.Job{} }, func() client.ObjectList { return &batchv1.JobList{} },
		func(l client.ObjectList) []client.Object { return objects(l.(*batchv1.JobList).Items) },
		func(o client.Object) (int32, *corev1.PodSpec) {
			j := o.(*batchv1.Job)
			return replicas(j.Spec.Parallelism), &j.Spec.Template.Spec
		}},
	"CronJob": {"batch/v1", "CronJob",
		func() client.Object { return &batchv1.CronJob{} }, func() client.ObjectList { return &batchv1.CronJobList{} },
		func(l client.ObjectList) []client.Object { return objects(l.(*batchv1.CronJobList).Items) },
		func(o client.Object) (int32, *corev1.PodSpec) {
			c := o.(*batchv1.CronJob)
			return replicas(c.Spec.JobTemplate.Spec.Parallelism), &c.Spec.JobTemplate.Spec.Template.Spec
		}},
	"Pod": {"v1", "Pod",
		func() client.Object { return &corev1.Pod{} }, func() client.ObjectList { return &corev1.PodList{} },
		func(l client.ObjectList) []client.Object { return objects(l.(*corev1.PodList).Items) },
		func(o client.Object) (int32, *corev1.PodSpec) { return 1, &o.(*corev1.Pod).Spec }},
}

// objects turns a list's items into objects; T is a struct type whose
// pointer is a client.Object.
func objects[T any, PT interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

// getTemplate reads the template t names.
func getTemplate(ctx context.Context, r client.Reader, t Template) (client.Object, templateKind, error) {
	k, ok := templateKinds[t.Kind]
	if !ok {
		return nil, k, fmt.Errorf("kind %s is not a workload template flotilla places", t.Kind)
	}
	obj := k.newObj()
	if err := r.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, obj); err != nil {
		return nil, k, err
	}
	return obj, k, nil
}

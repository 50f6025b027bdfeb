package workload

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// cronJob places CronJobs: each run's spec.jobTemplate.spec.parallelism
// pods at once.
type cronJob struct{ templated }

var _ Deriver = cronJob{}

func newCronJob() cronJob {
	return cronJob{templated{batchv1.SchemeGroupVersion.WithKind("CronJob"), "cronjobs", "/spec/jobTemplate/spec/template"}}
}

func (cronJob) New() Object           { return &batchv1.CronJob{} }
func (cronJob) NewList() List         { return &batchv1.CronJobList{} }
func (cronJob) Items(l List) []Object { return items(l.(*batchv1.CronJobList).Items) }

func (cronJob) Pods(obj Object) (int32, *corev1.PodSpec) {
	c := obj.(*batchv1.CronJob)
	return replicas(c.Spec.JobTemplate.Spec.Parallelism), &c.Spec.JobTemplate.Spec.Template.Spec
}

func (cronJob) CopySpec(dst, src Object, _ bool) bool {
	return setSpec(&dst.(*batchv1.CronJob).Spec, src.(*batchv1.CronJob).Spec)
}

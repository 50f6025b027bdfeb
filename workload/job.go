package workload

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// job places Jobs: spec.parallelism pods of spec.template at once.
type job struct{ templated }

var _ Deriver = job{}

func newJob() job {
	return job{templated{batchv1.SchemeGroupVersion.WithKind("Job"), "jobs", "/spec/template"}}
}

func (job) New() Object           { return &batchv1.Job{} }
func (job) NewList() List         { return &batchv1.JobList{} }
func (job) Items(l List) []Object { return items(l.(*batchv1.JobList).Items) }

func (job) Pods(obj Object) (int32, *corev1.PodSpec) {
	j := obj.(*batchv1.Job)
	return replicas(j.Spec.Parallelism), &j.Spec.Template.Spec
}

// CopySpec copies a Job's spec only into a new Job: it is immutable once
// created. The selector and the pod labels that name the template Job's
// UID are left for the API server to set for the copy.
func (job) CopySpec(dst, src Object, existing bool) bool {
	if existing {
		return false
	}
	spec := *src.(*batchv1.Job).Spec.DeepCopy()
	spec.Selector, spec.ManualSelector = nil, nil
	for _, l := range []string{batchv1.ControllerUidLabel, batchv1.JobNameLabel, "controller-uid", "job-name"} {
		delete(spec.Template.Labels, l)
	}
	dst.(*batchv1.Job).Spec = spec
	return true
}

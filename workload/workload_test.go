package workload

import (
	"context"
	"errors"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind, path string
		found                  bool
	}{
		{"apps/v1", "Deployment", "/spec/template", true},
		{"apps/v1", "StatefulSet", "/spec/template", true},
		{"apps/v1", "ReplicaSet", "/spec/template", true},
		{"batch/v1", "Job", "/spec/template", true},
		{"batch/v1", "CronJob", "/spec/jobTemplate/spec/template", true},
		{"v1", "Pod", "", true},
		// A DaemonSet runs one pod per node of the host: not a workload a
		// policy places (docs/policies.md).
		{"apps/v1", "DaemonSet", "", false},
		{"extensions/v1beta1", "Deployment", "", false},
		{"v1", "ConfigMap", "", false},
	} {
		a, ok := Lookup(tc.apiVersion, tc.kind)
		if ok != tc.found {
			t.Errorf("Lookup(%s, %s) found %v, want %v", tc.apiVersion, tc.kind, ok, tc.found)
			continue
		}
		if got := PodTemplatePath(tc.apiVersion, tc.kind); got != tc.path {
			t.Errorf("PodTemplatePath(%s, %s) = %q, want %q", tc.apiVersion, tc.kind, got, tc.path)
		}
		if !ok {
			continue
		}
		if gvk := a.GroupVersionKind(); gvk.GroupVersion().String() != tc.apiVersion || gvk.Kind != tc.kind {
			t.Errorf("Lookup(%s, %s) returned the adapter of %s", tc.apiVersion, tc.kind, gvk)
		}
		// The typed object is the kind it claims to be.
		if err := scheme(a.New()); err != tc.kind {
			t.Errorf("%s: New() makes a %s", tc.kind, err)
		}
	}
	if n := len(Controllers()); n != 5 {
		t.Errorf("Controllers() has %d kinds, want the 5 that make pods from a template", n)
	}
	if All()[0].GroupVersionKind() != (schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}) {
		t.Errorf("All() is not ordered by apiVersion then kind: first is %s", All()[0].GroupVersionKind())
	}
}

// scheme names the Go type of obj the way the API names the kind.
func scheme(obj Object) string {
	switch obj.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *appsv1.StatefulSet:
		return "StatefulSet"
	case *appsv1.ReplicaSet:
		return "ReplicaSet"
	case *batchv1.Job:
		return "Job"
	case *batchv1.CronJob:
		return "CronJob"
	case *corev1.Pod:
		return "Pod"
	}
	return "?"
}

func adapterOf(t *testing.T, kind string) Adapter {
	for _, a := range All() {
		if a.GroupVersionKind().Kind == kind {
			return a
		}
	}
	t.Fatalf("no adapter of kind %s", kind)
	return nil
}

func TestPodsAndItems(t *testing.T) {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}
	tpl := corev1.PodTemplateSpec{Spec: spec}
	for _, tc := range []struct {
		obj  Object
		list List
		want int32
	}{
		{&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Template: tpl}},
			&appsv1.DeploymentList{Items: []appsv1.Deployment{{}, {}}}, 3},
		{&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: tpl}}, &appsv1.DeploymentList{}, 1},
		{&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Template: tpl}},
			&appsv1.StatefulSetList{Items: []appsv1.StatefulSet{{}}}, 2},
		{&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4), Template: tpl}},
			&appsv1.ReplicaSetList{Items: []appsv1.ReplicaSet{{}, {}, {}}}, 4},
		{&batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](5), Template: tpl}},
			&batchv1.JobList{Items: []batchv1.Job{{}}}, 5},
		{&batchv1.CronJob{Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}},
			&batchv1.CronJobList{Items: []batchv1.CronJob{{}, {}}}, 1},
		{&corev1.Pod{Spec: spec}, &corev1.PodList{Items: []corev1.Pod{{}}}, 1},
	} {
		kind := scheme(tc.obj)
		a := adapterOf(t, kind)
		n, got := a.Pods(tc.obj)
		if n != tc.want || got.Containers[0].Image != "img" {
			t.Errorf("%s: Pods() = %d, %v; want %d and the template's spec", kind, n, got, tc.want)
		}
		// Pods returns the object's own spec, so a caller may read it in place.
		got.Containers[0].Image = "changed"
		if _, again := a.Pods(tc.obj); again.Containers[0].Image != "changed" {
			t.Errorf("%s: Pods() returned a copy of the spec", kind)
		}
		got.Containers[0].Image = "img" // the table's entries share the slice
		items := a.Items(tc.list)
		if want := meta.LenList(tc.list); len(items) != want {
			t.Errorf("%s: Items() has %d objects, the list %d", kind, len(items), want)
		}
		for _, o := range items {
			if scheme(o) != kind {
				t.Errorf("%s: Items() holds a %T", kind, o)
			}
		}
	}
}

func TestCopySpec(t *testing.T) {
	src := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}
	dst := &appsv1.Deployment{}
	d, _ := Lookup("apps/v1", "Deployment")
	if !d.(Deriver).CopySpec(dst, src, true) || *dst.Spec.Replicas != 3 {
		t.Fatalf("a Deployment copy did not take its template's spec: %+v", dst.Spec)
	}
	if d.(Deriver).CopySpec(dst, src, true) {
		t.Errorf("copying an equal spec reported a change (an update for nothing)")
	}

	// A Job's spec is immutable: copied at creation, without the labels and
	// selector that name the template Job.
	j, _ := Lookup("batch/v1", "Job")
	srcJob := &batchv1.Job{Spec: batchv1.JobSpec{
		Parallelism: ptr.To[int32](2),
		Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "u"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			batchv1.ControllerUidLabel: "u", batchv1.JobNameLabel: "j", "app": "x"}}},
	}}
	dstJob := &batchv1.Job{}
	if !j.(Deriver).CopySpec(dstJob, srcJob, false) {
		t.Fatal("a new Job copy did not take the spec")
	}
	if dstJob.Spec.Selector != nil || len(dstJob.Spec.Template.Labels) != 1 || *dstJob.Spec.Parallelism != 2 {
		t.Errorf("Job copy keeps the template Job's identity: %+v", dstJob.Spec)
	}
	if srcJob.Spec.Template.Labels[batchv1.JobNameLabel] != "j" {
		t.Errorf("copying a Job changed the template Job")
	}
	if j.(Deriver).CopySpec(dstJob, &batchv1.Job{}, true) {
		t.Errorf("a stored Job copy was changed; its spec is immutable")
	}
	if p, _ := Lookup("v1", "Pod"); isDeriver(p) {
		t.Errorf("a bare Pod claims per-cluster copies")
	}
}

func isDeriver(a Adapter) bool { _, ok := a.(Deriver); return ok }

// store is a Getter over objects keyed by kind/name.
type store map[string]metav1.Object

func (s store) get(_ context.Context, a Adapter, _, name string) (metav1.Object, error) {
	kind := a.GroupVersionKind().Kind
	if name == "broken" {
		return nil, errors.New("cache not synced")
	}
	if o, ok := s[kind+"/"+name]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(a.Resource().GroupResource(), name)
}

func owned(name, uid string, owner *metav1.OwnerReference) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return m
}

func ref(apiVersion, kind, name, uid string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}
}

func TestOwners(t *testing.T) {
	s := store{
		"Deployment/web":     &appsv1.Deployment{ObjectMeta: owned("web", "d1", nil)},
		"Deployment/web-b":   &appsv1.Deployment{ObjectMeta: owned("web-b", "d2", ref("apps/v1", "Deployment", "web", "d1"))},
		"ReplicaSet/web-1":   &appsv1.ReplicaSet{ObjectMeta: owned("web-1", "r1", ref("apps/v1", "Deployment", "web", "d1"))},
		"ReplicaSet/web-b-1": &appsv1.ReplicaSet{ObjectMeta: owned("web-b-1", "r2", ref("apps/v1", "Deployment", "web-b", "d2"))},
		"CronJob/nightly":    &batchv1.CronJob{ObjectMeta: owned("nightly", "c1", nil)},
		"Job/nightly-1":      &batchv1.Job{ObjectMeta: owned("nightly-1", "j1", ref("batch/v1", "CronJob", "nightly", "c1"))},
	}
	for name, tc := range map[string]struct {
		owner   *metav1.OwnerReference
		want    []string
		wantErr bool
	}{
		"bare pod":                    {nil, nil, false},
		"deployment's pod":            {ref("apps/v1", "ReplicaSet", "web-1", "r1"), []string{"ReplicaSet/web-1", "Deployment/web"}, false},
		"derived deployment's pod":    {ref("apps/v1", "ReplicaSet", "web-b-1", "r2"), []string{"ReplicaSet/web-b-1", "Deployment/web-b", "Deployment/web"}, false},
		"cronjob's pod":               {ref("batch/v1", "Job", "nightly-1", "j1"), []string{"Job/nightly-1", "CronJob/nightly"}, false},
		"daemonset's pod":             {ref("apps/v1", "DaemonSet", "agent", "x"), nil, false},
		"other group's controller":    {ref("example.io/v1", "ReplicaSet", "web-1", "r1"), nil, false},
		"owner not in the cache yet":  {ref("apps/v1", "ReplicaSet", "gone", "g"), nil, false},
		"owner of that name is newer": {ref("apps/v1", "ReplicaSet", "web-1", "old"), nil, false},
		"owner cannot be read":        {ref("apps/v1", "ReplicaSet", "broken", "b"), nil, true},
	} {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: owned("p", "p1", tc.owner)}
			got, err := Owners(context.Background(), s.get, p)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Owners() error = %v, want error %v", err, tc.wantErr)
			}
			var names []string
			for _, o := range got {
				names = append(names, o.Adapter.GroupVersionKind().Kind+"/"+o.Object.GetName())
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("Owners() = %v, want %v", names, tc.want)
			}
		})
	}
}

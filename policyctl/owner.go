package policyctl

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Template identifies a workload template: the object a policy's
// resourceSelector names and the pods it makes are placed for.
type Template struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
	// Labels are the template's own labels, which labelSelectors match.
	Labels map[string]string
	// DerivedCluster is set when the pod belongs to the template's derived
	// workload for that cluster (see DerivedAnnotation).
	DerivedCluster string
}

// String is kind/namespace/name, for logs and events.
func (t Template) String() string { return t.Kind + "/" + t.Namespace + "/" + t.Name }

// Key identifies the template regardless of its UID.
func (t Template) Key() TemplateKey {
	return TemplateKey{Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}
}

// TemplateKey is kind, namespace and name of a template.
type TemplateKey struct{ Kind, Namespace, Name string }

func templateOf(obj client.Object, apiVersion, kind string) Template {
	return Template{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		UID: obj.GetUID(), Labels: obj.GetLabels()}
}

// owners maps an owner kind to the kind a workload controller makes, so a
// pod's template is found by walking controller references up: a pod of a
// ReplicaSet of a Deployment belongs to the Deployment, a pod of a Job of a
// CronJob to the CronJob.
var ownerKinds = map[string]func() client.Object{
	"ReplicaSet":  func() client.Object { return &appsv1.ReplicaSet{} },
	"Deployment":  func() client.Object { return &appsv1.Deployment{} },
	"StatefulSet": func() client.Object { return &appsv1.StatefulSet{} },
	"DaemonSet":   func() client.Object { return &appsv1.DaemonSet{} },
	"Job":         func() client.Object { return &batchv1.Job{} },
	"CronJob":     func() client.Object { return &batchv1.CronJob{} },
}

// TemplateOf returns the outermost workload template a pod belongs to,
// following controller references through the kinds a policy can select
// (the pod itself when it has no such controller). An owner that does not
// exist (yet, in a cache) ends the walk at the last object found.
func TemplateOf(ctx context.Context, r client.Reader, pod *corev1.Pod) (Template, error) {
	t := templateOf(pod, "v1", "Pod")
	var obj client.Object = pod
	for range 5 { // Pod → ReplicaSet → derived Deployment → Deployment is the longest chain
		ref := metav1.GetControllerOf(obj)
		if ref == nil {
			return t, nil
		}
		newObj, ok := ownerKinds[ref.Kind]
		if !ok || !isWorkloadGroup(ref.APIVersion) {
			return t, nil
		}
		owner := newObj()
		if err := r.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, owner); err != nil {
			if apierrors.IsNotFound(err) {
				return t, nil
			}
			return Template{}, fmt.Errorf("get %s %s/%s owning %s: %w", ref.Kind, obj.GetNamespace(), ref.Name, t, err)
		}
		if owner.GetUID() != ref.UID {
			return t, nil // a newer object of that name
		}
		derived := t.DerivedCluster
		t, obj = templateOf(owner, ref.APIVersion, ref.Kind), owner
		t.DerivedCluster = derived
		if c := owner.GetAnnotations()[DerivedAnnotation]; c != "" {
			t.DerivedCluster = c
		}
	}
	return t, nil
}

func isWorkloadGroup(apiVersion string) bool {
	return apiVersion == "apps/v1" || apiVersion == "batch/v1"
}

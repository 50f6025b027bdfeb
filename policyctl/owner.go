package policyctl

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/workload"
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
	// workload for that cluster (see wellknown.DerivedAnnotation).
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

func templateOf(obj metav1.Object, apiVersion, kind string) Template {
	return Template{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		UID: obj.GetUID(), Labels: obj.GetLabels()}
}

// TemplateOf returns the outermost workload template a pod belongs to,
// following controller references through the kinds a policy can select
// (the pod itself when it has no such controller; see workload.Owners).
func TemplateOf(ctx context.Context, r client.Reader, pod *corev1.Pod) (Template, error) {
	owners, err := workload.Owners(ctx, func(ctx context.Context, a workload.Adapter, namespace, name string) (metav1.Object, error) {
		obj := a.New()
		return obj, r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	}, pod)
	if err != nil {
		return Template{}, err
	}
	t := templateOf(pod, "v1", "Pod")
	for _, o := range owners {
		derived := t.DerivedCluster
		gvk := o.Adapter.GroupVersionKind()
		t = templateOf(o.Object, gvk.GroupVersion().String(), gvk.Kind)
		t.DerivedCluster = derived
		if c := o.Object.GetAnnotations()[wellknown.DerivedAnnotation]; c != "" {
			t.DerivedCluster = c
		}
	}
	return t, nil
}

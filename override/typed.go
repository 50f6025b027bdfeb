package override

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// OverrideObject is Override for a typed object such as a *corev1.Pod or a
// *corev1.ConfigMap. gvk is the object's kind, which objects from a cache
// do not carry. It returns a changed copy and leaves obj alone. A change
// that the typed object cannot hold (a field its type does not have) is an
// error rather than lost.
func OverrideObject[T runtime.Object](obj T, gvk schema.GroupVersionKind, t Template, c Cluster, policies []Policy) (T, []PolicyRef, error) {
	var zero T
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return zero, nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	applied, err := Override(u, t, c, policies)
	if err != nil {
		return zero, nil, err
	}
	out, ok := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
	if !ok {
		return zero, nil, fmt.Errorf("cannot make a %T", obj)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		return zero, nil, fmt.Errorf("overridden %s: %w", gvk.Kind, err)
	}
	out.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return out, applied, nil
}

package policyctl

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"flotilla.io/flotilla/workload"
)

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
func getTemplate(ctx context.Context, r client.Reader, t Template) (client.Object, workload.Adapter, error) {
	a, ok := workload.Lookup(t.APIVersion, t.Kind)
	if !ok {
		return nil, nil, fmt.Errorf("%s %s is not a workload template flotilla places", t.APIVersion, t.Kind)
	}
	obj := a.New()
	if err := r.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, obj); err != nil {
		return nil, a, err
	}
	return obj, a, nil
}

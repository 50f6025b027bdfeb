package workload

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Owner is one workload of a pod's controller chain.
type Owner struct {
	// Adapter is the owner's kind.
	Adapter Adapter
	// Object is the owner as read (its metadata at least).
	Object metav1.Object
}

// Getter reads an object of a's kind; a missing object is an error
// apierrors.IsNotFound recognises.
type Getter func(ctx context.Context, a Adapter, namespace, name string) (metav1.Object, error)

// maxOwnerDepth bounds the walk: Pod → ReplicaSet → derived Deployment →
// Deployment is the longest chain flotilla makes.
const maxOwnerDepth = 5

// Owners returns the workloads controlling obj, innermost first, following
// controller references through the kinds flotilla places. The walk stops
// at a controller of another kind (a DaemonSet's pod has no owner here), at
// one that does not exist (yet, in a cache) and at one whose UID is not the
// reference's (a newer object of that name). Other read errors are
// returned: the chain is not known.
func Owners(ctx context.Context, get Getter, obj metav1.Object) ([]Owner, error) {
	var out []Owner
	for range maxOwnerDepth {
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil {
			break
		}
		a, ok := Lookup(ref.APIVersion, ref.Kind)
		if !ok || a.PodTemplatePath() == "" {
			break
		}
		owner, err := get(ctx, a, obj.GetNamespace(), ref.Name)
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("get %s %s/%s controlling %s: %w", ref.Kind, obj.GetNamespace(), ref.Name, obj.GetName(), err)
		}
		if owner.GetUID() != ref.UID {
			break
		}
		out = append(out, Owner{Adapter: a, Object: owner})
		obj = owner
	}
	return out, nil
}

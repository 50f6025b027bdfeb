// This file holds the transform of the host's Secret, ConfigMap and
// ServiceAccount caches, and the reads of the data they leave out.

package podcache

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// HostObjectTransform is the transform of the host informers other than
// the pods': managed fields go, and so does the data of Secrets and
// ConfigMaps. A host cluster's Secrets include every Helm release (up to a
// megabyte each) and every token of its own, and every flotilla-node
// watches them all; it mirrors only the few its pods use, and reads their
// data from the apiserver when it does (HostContents). Nothing may read
// data from these caches: a cached Secret without data is not an empty
// Secret.
func HostObjectTransform(obj any) (any, error) {
	obj, _ = StripManagedFields(obj)
	switch o := obj.(type) {
	case *corev1.Secret:
		o.Data, o.StringData = nil, nil
	case *corev1.ConfigMap:
		o.Data, o.BinaryData = nil, nil
	}
	return obj, nil
}

// HostContents reads the whole host objects whose cached copy is only
// metadata (HostObjectTransform), once per version: a pod burst that uses
// one Secret reads it once, and a change to the Secret once more. What is
// read is kept while it is the current version of an object in use: until
// the cache shows a newer one, or forget.
type HostContents[T metav1.Object] struct {
	get func(ctx context.Context, ns, name string) (T, error)

	mu    sync.Mutex
	byUID map[types.UID]T
}

// NewHostContents reads whole objects with get.
func NewHostContents[T metav1.Object](get func(ctx context.Context, ns, name string) (T, error)) *HostContents[T] {
	return &HostContents[T]{get: get, byUID: map[types.UID]T{}}
}

// of is the whole object of which cached is the cache's copy. The
// apiserver may return a newer version than the cache shows, or a new
// object of the same name; either is what a mirror should copy.
func (c *HostContents[T]) Of(ctx context.Context, cached T) (T, error) {
	c.mu.Lock()
	cur, ok := c.byUID[cached.GetUID()]
	c.mu.Unlock()
	// An object without a resourceVersion (a test's fake apiserver) is
	// read each time: its versions cannot be told apart.
	if rv := cached.GetResourceVersion(); ok && rv != "" && cur.GetResourceVersion() == rv {
		return cur, nil
	}
	whole, err := c.get(ctx, cached.GetNamespace(), cached.GetName())
	if err != nil {
		var zero T
		return zero, err
	}
	c.mu.Lock()
	if whole.GetUID() == cached.GetUID() {
		c.byUID[whole.GetUID()] = whole
	}
	c.mu.Unlock()
	return whole, nil
}

// forget drops what was read of an object the cache no longer has.
func (c *HostContents[T]) Forget(uid types.UID) {
	c.mu.Lock()
	delete(c.byUID, uid)
	c.mu.Unlock()
}

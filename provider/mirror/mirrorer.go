package mirror

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/translate"
)

// mirrorLabels are a mirrored object's labels: the host object's, plus
// flotilla's identity so that only objects carrying it are ever updated or
// deleted.
func mirrorLabels(host map[string]string, t translate.Target) map[string]string {
	return t.Owner().Stamp(host)
}

// mirrorAnnotations are a mirrored object's annotations: the host object's
// (member webhooks may act on them, e.g. a ServiceAccount's cloud identity),
// plus where it comes from.
func mirrorAnnotations(host map[string]string, hostNS, name string) map[string]string {
	a := maps.Clone(host)
	if a == nil {
		a = map[string]string{}
	}
	a[wellknown.HostNamespaceAnnotation] = hostNS
	a[wellknown.HostNameAnnotation] = name
	return a
}

// mirrorObject is the shape of a mirrored API object.
type mirrorObject interface {
	metav1.Object
	runtime.Object
}

// objectClient is the part of a typed client mirroring writes through.
type objectClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Outcome is what mirroring one object came to.
type Outcome int

const (
	Mirrored     Outcome = iota // the member copy is current
	AbsentInHost                // the host object does not exist
	NotOwned                    // a member object of that name is not flotilla's
)

// Mirrorer mirrors one kind of object.
type Mirrorer interface {
	// InHost reports whether the host object exists; an error means that
	// it cannot be told yet (a cache or the override policies not read).
	InHost(ctx context.Context, hostNS, name string) (bool, error)
	// Apply makes the member copy of hostNS/name current in t.
	Apply(ctx context.Context, hostNS, name string, t translate.Target) (Outcome, error)
	// Remove deletes the member copy memberNS/name, if it is flotilla's.
	Remove(ctx context.Context, memberNS, name string) error
}

// KindMirror mirrors objects of type T from the host into the member. host
// and mirror read caches: the host's objects, and flotilla's own member
// copies (objects carrying this node's identity labels) only.
type KindMirror[T mirrorObject] struct {
	kind   string
	host   func(ctx context.Context, ns, name string) (T, error)
	mirror func(ns, name string) (T, error)
	client func(ns string) objectClient[T]
	owns   func(metav1.Object) bool
	newObj func() T
	// content copies what a copy carries besides metadata from src to dst.
	content func(dst, src T)
	// sameContent compares what content copies.
	sameContent func(a, b T) bool
	// replace reports whether cur cannot be updated into want (a Secret's
	// type or an immutable object's data changed): it is recreated.
	replace func(cur, want T) bool
}

var _ Mirrorer = (*KindMirror[*corev1.Secret])(nil)

// InHost reports whether the host object exists; see Mirrorer.
func (k *KindMirror[T]) InHost(ctx context.Context, hostNS, name string) (bool, error) {
	_, err := k.host(ctx, hostNS, name)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// desired is the member copy of the host object src for target t.
func (k *KindMirror[T]) desired(src T, t translate.Target) T {
	want := k.newObj()
	want.SetName(src.GetName())
	want.SetNamespace(t.Namespace)
	want.SetLabels(mirrorLabels(src.GetLabels(), t))
	want.SetAnnotations(mirrorAnnotations(src.GetAnnotations(), src.GetNamespace(), src.GetName()))
	k.content(want, src)
	return want
}

func (k *KindMirror[T]) same(cur, want T) bool {
	return maps.Equal(cur.GetLabels(), want.GetLabels()) &&
		maps.Equal(cur.GetAnnotations(), want.GetAnnotations()) &&
		k.sameContent(cur, want)
}

// apply creates or updates the member copy of host object hostNS/name,
// writing only what differs. A member object of that name that flotilla does
// not manage is left alone and reported as NotOwned.
// Apply makes the member copy of the host object hostNS/name current in
// t, and says what it came to.
func (k *KindMirror[T]) Apply(ctx context.Context, hostNS, name string, t translate.Target) (Outcome, error) {
	src, err := k.host(ctx, hostNS, name)
	if apierrors.IsNotFound(err) {
		return AbsentInHost, nil
	}
	if err != nil {
		return 0, err
	}
	want := k.desired(src, t)
	c := k.client(t.Namespace)
	cur, err := k.mirror(t.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		_, err := c.Create(ctx, want, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return Mirrored, err
		}
		// Not among our copies: someone else's, or ours and the cache lags.
		if cur, err = c.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return 0, err
		}
		if !k.owns(cur) {
			return NotOwned, nil
		}
	case err != nil:
		return 0, err
	}
	return Mirrored, k.update(ctx, c, cur, want)
}

func (k *KindMirror[T]) update(ctx context.Context, c objectClient[T], cur, want T) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			live, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = live
		}
		first = false
		if k.same(cur, want) {
			return nil
		}
		if k.replace(cur, want) {
			err := c.Delete(ctx, cur.GetName(), metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(cur.GetUID()))})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			_, err = c.Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s %s/%s recreated concurrently: %w", k.kind, want.GetNamespace(), want.GetName(), transient.ErrRetry)
			}
			return err
		}
		upd := cur.DeepCopyObject().(T)
		upd.SetLabels(want.GetLabels())
		upd.SetAnnotations(want.GetAnnotations())
		k.content(upd, want)
		_, err := c.Update(ctx, upd, metav1.UpdateOptions{})
		return err
	})
}

// remove deletes flotilla's member copy, if there is one.
// Remove deletes the member copy memberNS/name, if it is flotilla's.
func (k *KindMirror[T]) Remove(ctx context.Context, memberNS, name string) error {
	cur, err := k.mirror(memberNS, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = k.client(memberNS).Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(cur.GetUID()))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

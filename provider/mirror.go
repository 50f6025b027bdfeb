package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/wellknown"
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

// outcome is what mirroring one object came to.
type outcome int

const (
	mirrored     outcome = iota // the member copy is current
	absentInHost                // the host object does not exist
	notOwned                    // a member object of that name is not flotilla's
)

// mirrorer mirrors one kind of object.
type mirrorer interface {
	// inHost reports whether the host object exists; an error means that
	// it cannot be told yet (a cache or the override policies not read).
	inHost(ctx context.Context, hostNS, name string) (bool, error)
	apply(ctx context.Context, hostNS, name string, t translate.Target) (outcome, error)
	remove(ctx context.Context, memberNS, name string) error
}

// kindMirror mirrors objects of type T from the host into the member. host
// and mirror read caches: the host's objects, and flotilla's own member
// copies (objects carrying this node's identity labels) only.
type kindMirror[T mirrorObject] struct {
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

var _ mirrorer = (*kindMirror[*corev1.Secret])(nil)

func (k *kindMirror[T]) inHost(ctx context.Context, hostNS, name string) (bool, error) {
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
func (k *kindMirror[T]) desired(src T, t translate.Target) T {
	want := k.newObj()
	want.SetName(src.GetName())
	want.SetNamespace(t.Namespace)
	want.SetLabels(mirrorLabels(src.GetLabels(), t))
	want.SetAnnotations(mirrorAnnotations(src.GetAnnotations(), src.GetNamespace(), src.GetName()))
	k.content(want, src)
	return want
}

func (k *kindMirror[T]) same(cur, want T) bool {
	return maps.Equal(cur.GetLabels(), want.GetLabels()) &&
		maps.Equal(cur.GetAnnotations(), want.GetAnnotations()) &&
		k.sameContent(cur, want)
}

// apply creates or updates the member copy of host object hostNS/name,
// writing only what differs. A member object of that name that flotilla does
// not manage is left alone and reported as notOwned.
func (k *kindMirror[T]) apply(ctx context.Context, hostNS, name string, t translate.Target) (outcome, error) {
	src, err := k.host(ctx, hostNS, name)
	if apierrors.IsNotFound(err) {
		return absentInHost, nil
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
			return mirrored, err
		}
		// Not among our copies: someone else's, or ours and the cache lags.
		if cur, err = c.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return 0, err
		}
		if !k.owns(cur) {
			return notOwned, nil
		}
	case err != nil:
		return 0, err
	}
	return mirrored, k.update(ctx, c, cur, want)
}

func (k *kindMirror[T]) update(ctx context.Context, c objectClient[T], cur, want T) error {
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
				return fmt.Errorf("%s %s/%s recreated concurrently: %w", k.kind, want.GetNamespace(), want.GetName(), errRetry)
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
func (k *kindMirror[T]) remove(ctx context.Context, memberNS, name string) error {
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

func secretMirror(c kube.Interface, host func(ctx context.Context, ns, name string) (*corev1.Secret, error), mirror func(ns, name string) (*corev1.Secret, error), owns func(metav1.Object) bool) *kindMirror[*corev1.Secret] {
	return &kindMirror[*corev1.Secret]{
		kind: kindSecret, host: host, mirror: mirror, owns: owns,
		client: func(ns string) objectClient[*corev1.Secret] { return c.CoreV1().Secrets(ns) },
		newObj: func() *corev1.Secret { return &corev1.Secret{} },
		content: func(dst, src *corev1.Secret) {
			dst.Type = src.Type
			dst.Data = maps.Clone(src.Data)
			dst.Immutable = src.Immutable
			if dst.Type == corev1.SecretTypeServiceAccountToken {
				// The member's token controller deletes token Secrets of
				// ServiceAccounts it does not know; the pod reads the host's
				// token as plain data instead.
				dst.Type = corev1.SecretTypeOpaque
				delete(dst.Annotations, corev1.ServiceAccountNameKey)
				delete(dst.Annotations, corev1.ServiceAccountUIDKey)
			}
		},
		sameContent: func(a, b *corev1.Secret) bool {
			return a.Type == b.Type && ptr.Deref(a.Immutable, false) == ptr.Deref(b.Immutable, false) &&
				equality.Semantic.DeepEqual(a.Data, b.Data)
		},
		replace: func(cur, want *corev1.Secret) bool {
			return cur.Type != want.Type ||
				(ptr.Deref(cur.Immutable, false) && !equality.Semantic.DeepEqual(cur.Data, want.Data))
		},
	}
}

func configMapMirror(c kube.Interface, host func(ctx context.Context, ns, name string) (*corev1.ConfigMap, error), mirror func(ns, name string) (*corev1.ConfigMap, error), owns func(metav1.Object) bool) *kindMirror[*corev1.ConfigMap] {
	sameData := func(a, b *corev1.ConfigMap) bool {
		return equality.Semantic.DeepEqual(a.Data, b.Data) && equality.Semantic.DeepEqual(a.BinaryData, b.BinaryData)
	}
	return &kindMirror[*corev1.ConfigMap]{
		kind: kindConfigMap, host: host, mirror: mirror, owns: owns,
		client: func(ns string) objectClient[*corev1.ConfigMap] { return c.CoreV1().ConfigMaps(ns) },
		newObj: func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		content: func(dst, src *corev1.ConfigMap) {
			dst.Data = maps.Clone(src.Data)
			dst.BinaryData = maps.Clone(src.BinaryData)
			dst.Immutable = src.Immutable
		},
		sameContent: func(a, b *corev1.ConfigMap) bool {
			return ptr.Deref(a.Immutable, false) == ptr.Deref(b.Immutable, false) && sameData(a, b)
		},
		replace: func(cur, want *corev1.ConfigMap) bool {
			return ptr.Deref(cur.Immutable, false) && !sameData(cur, want)
		},
	}
}

// serviceAccountMirror copies a ServiceAccount's name, image pull secrets and
// token automount setting. Its legacy token Secrets are not copied: the
// member issues the tokens of its own copy.
func serviceAccountMirror(c kube.Interface, host func(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error), mirror func(ns, name string) (*corev1.ServiceAccount, error), owns func(metav1.Object) bool) *kindMirror[*corev1.ServiceAccount] {
	return &kindMirror[*corev1.ServiceAccount]{
		kind: kindServiceAccount, host: host, mirror: mirror, owns: owns,
		client: func(ns string) objectClient[*corev1.ServiceAccount] { return c.CoreV1().ServiceAccounts(ns) },
		newObj: func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} },
		content: func(dst, src *corev1.ServiceAccount) {
			dst.ImagePullSecrets = slices.Clone(src.ImagePullSecrets)
			dst.AutomountServiceAccountToken = src.AutomountServiceAccountToken
		},
		sameContent: func(a, b *corev1.ServiceAccount) bool {
			return ptr.Deref(a.AutomountServiceAccountToken, true) == ptr.Deref(b.AutomountServiceAccountToken, true) &&
				equality.Semantic.DeepEqual(a.ImagePullSecrets, b.ImagePullSecrets)
		},
		replace: func(_, _ *corev1.ServiceAccount) bool { return false },
	}
}

// This file holds the mirrors of the objects pods depend on: Secrets,
// ConfigMaps and ServiceAccounts, each a KindMirror.

package mirror

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube"
)

// SecretMirror mirrors Secrets: their type, data and immutability; a
// changed type or the data of an immutable Secret recreates the copy.
func SecretMirror(c kube.Interface, host func(ctx context.Context, ns, name string) (*corev1.Secret, error), mirror func(ns, name string) (*corev1.Secret, error), owns func(metav1.Object) bool) *KindMirror[*corev1.Secret] {
	return &KindMirror[*corev1.Secret]{
		kind: KindSecret, host: host, mirror: mirror, owns: owns,
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

// ConfigMapMirror mirrors ConfigMaps: their data, binary data and
// immutability.
func ConfigMapMirror(c kube.Interface, host func(ctx context.Context, ns, name string) (*corev1.ConfigMap, error), mirror func(ns, name string) (*corev1.ConfigMap, error), owns func(metav1.Object) bool) *KindMirror[*corev1.ConfigMap] {
	sameData := func(a, b *corev1.ConfigMap) bool {
		return equality.Semantic.DeepEqual(a.Data, b.Data) && equality.Semantic.DeepEqual(a.BinaryData, b.BinaryData)
	}
	return &KindMirror[*corev1.ConfigMap]{
		kind: KindConfigMap, host: host, mirror: mirror, owns: owns,
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

// ServiceAccountMirror copies a ServiceAccount's name and token automount
// setting. Its legacy token Secrets are not copied: the member issues the
// tokens of its own copy. Nor are its image pull secrets: the host's
// admission wrote them into the pods that use them, the pods carry them to
// the member, and a virtual node, like a kubelet, may read no Secret that
// its pods do not name.
func ServiceAccountMirror(c kube.Interface, host func(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error), mirror func(ns, name string) (*corev1.ServiceAccount, error), owns func(metav1.Object) bool) *KindMirror[*corev1.ServiceAccount] {
	return &KindMirror[*corev1.ServiceAccount]{
		kind: KindServiceAccount, host: host, mirror: mirror, owns: owns,
		client: func(ns string) objectClient[*corev1.ServiceAccount] { return c.CoreV1().ServiceAccounts(ns) },
		newObj: func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} },
		content: func(dst, src *corev1.ServiceAccount) {
			dst.ImagePullSecrets = nil
			dst.AutomountServiceAccountToken = src.AutomountServiceAccountToken
		},
		sameContent: func(a, b *corev1.ServiceAccount) bool {
			return ptr.Deref(a.AutomountServiceAccountToken, true) == ptr.Deref(b.AutomountServiceAccountToken, true) &&
				len(a.ImagePullSecrets) == len(b.ImagePullSecrets)
		},
		replace: func(_, _ *corev1.ServiceAccount) bool { return false },
	}
}

// This file holds the transform of the host informers other than the
// pods'.

package podcache

import (
	corev1 "k8s.io/api/core/v1"
)

// HostObjectTransform is the transform of the host informers other than
// the pods': managed fields go, and so does the data of Secrets and
// ConfigMaps. The host factory holds no informer of either (a node reads
// only the few its pods use, one at a time, whole: the provider's
// dependency watches); should one be added, it must not hold a host
// cluster's every Helm release (up to a megabyte each) and token. Nothing
// may read data from these caches: a cached Secret without data is not an
// empty Secret.
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

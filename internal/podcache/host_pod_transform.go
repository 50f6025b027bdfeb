// This file holds the transforms of the host pod caches and what they
// share with the member pod caches'.

package podcache

import (
	"maps"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/podspec"
)

// The informers of a flotilla-node hold every pod it forwards twice: the
// host pod and its member pod. These transforms run on each object before
// an informer stores it and keep only what flotilla reads, so that a
// process forwarding tens of thousands of pods holds as little per pod as
// it can. They are idempotent, as client-go requires, and they never change
// what a reader of the cache sees of the fields it keeps. Nothing writes a
// cached object back: every update starts from a fresh read (UpdatePod,
// release) or from an object flotilla did not forward (takeOver), which
// keeps its whole spec.

// StripManagedFields is the transform of every informer: no reader of a
// flotilla-node cache looks at managed fields, often the largest part of
// an object's metadata.
func StripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// HostPodTransform is the transform of the host pod informers. The host
// pod's spec is what forwarding sends, so it is kept, except for what
// ToMember drops anyway: of the service-account token volume the host's
// admission added (kube-api-access-*), only its token source is kept,
// which is what the pod's dependency on its ServiceAccount is read from,
// and its mounts go.
func HostPodTransform(obj any) (any, error) {
	obj, _ = StripManagedFields(obj)
	if pod, ok := obj.(*corev1.Pod); ok {
		sharePrev(pod, nil, trimHostSpec)
	}
	return obj, nil
}

// trimHostSpec is what HostPodTransform does to a host pod's spec.
func trimHostSpec(s *corev1.PodSpec) {
	trimTokenVolume(s)
	internSpec(s)
}

// shareUnchanged makes cur, a new version of the cached pod prev, share
// with it what did not change. Most updates of a host pod change its
// status alone; without this, each version holds a copy of its own of the
// metadata and the spec, and a reader that keeps an older version holds
// two: virtual-kubelet keeps the version it last handed the provider
// (knownPod.lastPodUsed) until the spec changes, which it seldom does, so
// the first bound version of every pod lived as long as the pod. It
// reports whether the spec is now prev's.
func shareUnchanged(prev, cur *corev1.Pod) (specShared bool) {
	if prev.UID != cur.UID {
		return false
	}
	shareMeta(&cur.ObjectMeta, &prev.ObjectMeta)
	if sameSpec(prev, cur) {
		cur.Spec = prev.Spec
		return true
	}
	return false
}

// shareMeta makes m, the metadata of a new version of the object whose
// cached version's is pm, share with pm what did not change.
func shareMeta(m, pm *metav1.ObjectMeta) {
	m.Namespace, m.Name, m.UID = pm.Namespace, pm.Name, pm.UID
	if m.GenerateName == pm.GenerateName {
		m.GenerateName = pm.GenerateName
	}
	if maps.Equal(m.Labels, pm.Labels) {
		m.Labels = pm.Labels
	}
	if maps.Equal(m.Annotations, pm.Annotations) {
		m.Annotations = pm.Annotations
	}
	if slices.Equal(m.Finalizers, pm.Finalizers) {
		m.Finalizers = pm.Finalizers
	}
	if slices.EqualFunc(m.OwnerReferences, pm.OwnerReferences, func(a, b metav1.OwnerReference) bool {
		return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
			ptr.Equal(a.Controller, b.Controller) && ptr.Equal(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
	}) {
		m.OwnerReferences = pm.OwnerReferences
	}
}

// sameSpec reports whether two versions of a pod have the same spec. The
// apiserver bumps a pod's generation on every change of its spec but
// binding (Kubernetes 1.33 and later), which sets the node: the same
// generation and node is the same spec, without comparing it, which
// would cost more than the rest of a transform. Before 1.33 a pod has no
// generation, and the specs are compared.
func sameSpec(prev, cur *corev1.Pod) bool {
	if prev.Spec.NodeName != cur.Spec.NodeName {
		return false
	}
	if prev.Generation > 0 {
		return prev.Generation == cur.Generation
	}
	return cur.Generation == 0 && reflect.DeepEqual(prev.Spec, cur.Spec)
}

// trimTokenVolume trims in place: the transforms run on every event of
// every pod, so they allocate nothing.
func trimTokenVolume(s *corev1.PodSpec) {
	found := false
	for i := range s.Volumes {
		v := &s.Volumes[i]
		if !podspec.IsServiceAccountToken(v) {
			continue
		}
		found = true
		v.Projected.Sources = keepIn(v.Projected.Sources, func(p *corev1.VolumeProjection) bool { return p.ServiceAccountToken != nil })
	}
	if !found {
		return
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = keepIn(cs[i].VolumeMounts, func(m *corev1.VolumeMount) bool {
				return !slices.ContainsFunc(s.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name && podspec.IsServiceAccountToken(&v) })
			})
		}
	}
}

// keepIn keeps the elements of xs for which keep holds, in place; the rest
// of the array is cleared so that it holds on to nothing. Nil for none.
func keepIn[T any](xs []T, keep func(*T) bool) []T {
	n := 0
	for i := range xs {
		if keep(&xs[i]) {
			xs[n] = xs[i]
			n++
		}
	}
	clear(xs[n:])
	if n == 0 {
		return nil
	}
	return xs[:n]
}

// cachedObject is the version of obj the store cached returns holds, if
// any.
func cachedObject(cached func() cache.Store, obj any) any {
	if cached == nil {
		return nil
	}
	store := cached()
	if store == nil {
		return nil
	}
	prev, _, _ := store.Get(obj)
	return prev
}

// cachedPod is the version of pod the host pod store cached holds, if any.
func cachedPod(cached func() cache.Store, pod *corev1.Pod) *corev1.Pod {
	prev, _ := cachedObject(cached, pod).(*corev1.Pod)
	return prev
}

// sharePrev transforms pod, a new version of prev (nil when none is
// cached): its spec trimmed by trim unless known unchanged by its
// generation (it is then prev's, trimmed already), its status and
// metadata interned, and what did not change shared with prev.
func sharePrev(pod, prev *corev1.Pod, trim func(*corev1.PodSpec)) {
	internStatus(&pod.Status)
	if prev != nil && prev.Generation > 0 && shareUnchanged(prev, pod) {
		internMetaAfter(&pod.ObjectMeta, &prev.ObjectMeta)
		return
	}
	trim(&pod.Spec)
	var prevMeta *metav1.ObjectMeta
	if prev != nil {
		shareUnchanged(prev, pod)
		prevMeta = &prev.ObjectMeta
	}
	internMetaAfter(&pod.ObjectMeta, prevMeta)
}

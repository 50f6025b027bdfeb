// Package memberpod is what a flotilla-node caches of a member pod: a Pod,
// smaller than a corev1.Pod, and the Lister that reads the cache.
//
// A flotilla-node caches every pod of its member: the pods it forwarded,
// and the member's own, which its fit model counts. A corev1.Pod struct is
// 1,168 bytes (1,280 as allocated) before any field of it is set, most of
// it the spec's fields, which flotilla reads a tenth of; and a forwarded
// pod's label map would be its own for the one label that names its host
// pod. A Pod keeps the spec that flotilla reads behind a pointer, shared by
// the pods that have the same, and that label as a field.
package memberpod

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
)

// Pod is a member pod as the member pod cache holds it.
type Pod struct {
	// ObjectMeta is the pod's metadata, but for the host UID label.
	metav1.ObjectMeta
	// HostUID is the value of the pod's wellknown.HostUIDLabel: the UID of
	// the host pod it was forwarded for, empty for a pod of another owner.
	HostUID types.UID
	// Spec is what the cache keeps of the pod's spec (never nil), shared
	// with other pods: read it, never write it.
	Spec *corev1.PodSpec
	// Status is the pod's status, as the cache keeps it.
	Status corev1.PodStatus
}

// New is the Pod of pod as it is, the host UID label left in its labels:
// for pods not read from the cache (the member pod cache takes the label
// out, see podcache.MemberPodsTransform). pod is not copied.
func New(pod *corev1.Pod) *Pod {
	return &Pod{ObjectMeta: pod.ObjectMeta, HostUID: types.UID(pod.Labels[wellknown.HostUIDLabel]), Spec: &pod.Spec, Status: pod.Status}
}

// Of is the Pod of an informer's object: a Pod, a corev1.Pod (a cache
// without the transform, as in tests), or the last state of either that a
// tombstone holds.
func Of(obj any) (*Pod, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch o := obj.(type) {
	case *Pod:
		return o, true
	case *corev1.Pod:
		return New(o), true
	}
	return nil, false
}

// AsPod is p as a corev1.Pod, for what reads one (the fit model, which
// counts its requests): its metadata, the spec kept and the status. Its
// labels lack the host UID; the rest of the pod is shared with p.
func (p *Pod) AsPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: p.ObjectMeta, Spec: *p.Spec, Status: p.Status}
}

// Terminal reports whether the pod's containers have finished for good:
// phase Succeeded or Failed.
func (p *Pod) Terminal() bool {
	return podstate.TerminalPhase(p.Status.Phase)
}

// Lister reads member pods from the cache, as client-go's pod lister does
// for corev1.Pods.
type Lister struct{ Indexer cache.Indexer }

// Get returns the pod namespace/name, or a NotFound error.
func (l Lister) Get(namespace, name string) (*Pod, error) {
	obj, ok, err := l.Indexer.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if p, found := Of(obj); ok && found {
		return p, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

// List returns the pods whose labels (the host UID's not among them)
// selector matches.
func (l Lister) List(selector labels.Selector) ([]*Pod, error) {
	var out []*Pod
	err := cache.ListAll(l.Indexer, selector, func(obj any) {
		if p, ok := Of(obj); ok {
			out = append(out, p)
		}
	})
	return out, err
}

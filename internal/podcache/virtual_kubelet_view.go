// This file holds the host pod informer as virtual-kubelet's pod
// controller gets it: views of pods, private copies of what it reads.

package podcache

import (
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// PodInformerForVirtualKubelet is the host pod informer as virtual-kubelet's
// pod controller must get it: its lister returns views (VirtualKubeletView), private
// copies of only what virtual-kubelet reads, and its event handlers are
// called with views.
//
// A copy, because with downward API resolution skipped (flotilla mirrors
// Secrets and ConfigMaps as objects rather than inlining them)
// virtual-kubelet v1.13 writes a failed create's status into the very pod
// its lister returned (node/pod.go, handleProviderError): into the shared
// cache, while the informer's other readers run.
//
// Only what it reads, because virtual-kubelet keeps the last pod it synced
// for every pod, and compares each new version with it in full through
// go-cmp with a path filter that formats every path (podsEffectivelyEqual):
// about a millisecond and thousands of allocations for a whole pod, the
// largest single cost of a forwarded pod's deletion. A view makes both the
// kept pod and the comparison a fraction of that.
func PodInformerForVirtualKubelet(inf corev1informers.PodInformer) corev1informers.PodInformer {
	return viewPodInformer{inf}
}

type viewPodInformer struct{ corev1informers.PodInformer }

// Informer calls handlers with views: on every update of a host pod,
// virtual-kubelet compares the old and the new pod's containers with go-cmp
// (node/pod.go podShouldEnqueue), which costs a fraction on views. It only
// keeps keys of what its handlers are given.
func (i viewPodInformer) Informer() cache.SharedIndexInformer {
	return handlerWrapping{SharedIndexInformer: i.PodInformer.Informer(), wrap: func(h cache.ResourceEventHandler) cache.ResourceEventHandler {
		return viewHandler{h}
	}}
}

type viewHandler struct{ h cache.ResourceEventHandler }

func (v viewHandler) OnAdd(obj any, initial bool) { v.h.OnAdd(viewOf(obj), initial) }

// OnDelete passes on a pod the informer found gone only as it listed
// again (a cache.DeletedFinalStateUnknown: deleted while the watch was
// broken, as during a lost link to the host) as the pod it last saw.
// virtual-kubelet's handler and its event filter take pods only and drop
// anything else: the member pod of a host pod deleted during an outage
// would run on, and virtual-kubelet keep its record of the pod for good.
func (v viewHandler) OnDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if pod, ok := d.Obj.(*corev1.Pod); ok {
			obj = pod
		}
	}
	v.h.OnDelete(viewOf(obj))
}

// OnUpdate passes on the updates virtual-kubelet acts on. Of every update
// of a host pod, virtual-kubelet's handler (node/podcontroller.go) only
// enqueues the pod when podShouldEnqueue tells a change of its
// containers, tolerations, deadline, labels, annotations or deletion;
// most updates change the status alone (each status flotilla-node writes
// comes back as one), and those it would compare in full for nothing.
func (v viewHandler) OnUpdate(old, cur any) {
	o, ok1 := old.(*corev1.Pod)
	c, ok2 := cur.(*corev1.Pod)
	if ok1 && ok2 && nothingToSync(o, c) {
		return
	}
	v.h.OnUpdate(viewOf(old), viewOf(cur))
}

// nothingToSync reports whether cur, a newer version of old, changed
// nothing virtual-kubelet syncs to the provider: the same spec (told by
// the generation, see sameSpec; a pod without one is passed on),
// labels, annotations and deletion.
func nothingToSync(old, cur *corev1.Pod) bool {
	return old.UID == cur.UID && old.Generation > 0 && sameSpec(old, cur) &&
		maps.Equal(old.Labels, cur.Labels) && maps.Equal(old.Annotations, cur.Annotations) &&
		old.DeletionTimestamp.Equal(cur.DeletionTimestamp) && ptr.Equal(old.DeletionGracePeriodSeconds, cur.DeletionGracePeriodSeconds)
}

func viewOf(obj any) any {
	switch o := obj.(type) {
	case *corev1.Pod:
		return VirtualKubeletView(o)
	case cache.DeletedFinalStateUnknown:
		if pod, ok := o.Obj.(*corev1.Pod); ok {
			o.Obj = VirtualKubeletView(pod)
		}
		return o
	}
	return obj
}

func (i viewPodInformer) Lister() corev1listers.PodLister {
	return viewPodLister{i.PodInformer.Lister()}
}

// viewPodLister returns views from Get; List is left as it is, since
// virtual-kubelet only reads what it lists.
type viewPodLister struct{ corev1listers.PodLister }

func (l viewPodLister) Pods(namespace string) corev1listers.PodNamespaceLister {
	return viewPodNamespaceLister{l.PodLister.Pods(namespace)}
}

type viewPodNamespaceLister struct {
	corev1listers.PodNamespaceLister
}

func (l viewPodNamespaceLister) Get(name string) (*corev1.Pod, error) {
	pod, err := l.PodNamespaceLister.Get(name)
	if pod != nil {
		pod = VirtualKubeletView(pod)
	}
	return pod, err
}

// viewMarker is the scheduler name of a view, which no pod the apiserver
// holds has (it defaults the field): the provider knows a view when
// virtual-kubelet hands one back, and never forwards it.
const viewMarker = "flotilla.io/virtual-kubelet-view"

// VirtualKubeletView is a copy of pod with all of its metadata and status and, of its
// spec, what virtual-kubelet reads: the restart policy, the node, and in
// place of what it compares to decide on an update (containers, init and
// ephemeral containers by name and image, the active deadline and the
// tolerations; see node/pod.go podsEqual) one toleration whose key spells
// them out (syncKey). Two views differ there exactly when their pods
// differ in those fields, so virtual-kubelet syncs the same updates.
//
// Why not the fields themselves: at every deletion virtual-kubelet
// compares the view with the last one it synced through go-cmp with a
// filter that formats the path of every field it visits
// (podsEffectivelyEqual), and a container alone has 25 fields, a
// toleration 5: their paths were more than half of the comparison's time
// and allocations, and the comparison the largest single part of
// flotilla-node's CPU per pod (BenchmarkVirtualKubeletComparison).
//
// Status updates virtual-kubelet writes from a view keep the pod's spec:
// the pods/status endpoint takes the spec from the stored pod.
//
// The copy is shallow: its maps and slices (labels, annotations, owner
// references, conditions, container statuses) are the cached pod's.
// virtual-kubelet writes only top-level fields of a pod it was given
// (resource version, phase, reason, message), which are the view's own,
// and nothing writes into a cached pod's maps or slices.
func VirtualKubeletView(pod *corev1.Pod) *corev1.Pod {
	s := &pod.Spec
	v := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta, Status: pod.Status}
	v.Spec = corev1.PodSpec{
		NodeName:      s.NodeName,
		SchedulerName: viewMarker,
		RestartPolicy: s.RestartPolicy,
		Tolerations:   syncKey(s),
	}
	return v
}

// syncKey is the one toleration of a view, whose key spells out what
// virtual-kubelet compares of spec s: its containers', init containers'
// and ephemeral containers' names and images, its active deadline and
// its tolerations, each string after its length. The views of a
// workload's pods share it.
func syncKey(s *corev1.PodSpec) []corev1.Toleration {
	bp := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(bp)
	key := append((*bp)[:0], viewKeyPrefix...)
	for _, c := range s.Containers {
		key = appendSized(key, c.Name, c.Image)
	}
	key = append(key, " init"...)
	for _, c := range s.InitContainers {
		key = appendSized(key, c.Name, c.Image)
	}
	key = append(key, " ephemeral"...)
	for _, c := range s.EphemeralContainers {
		key = appendSized(key, c.Name, c.Image)
	}
	key = append(key, " deadline "...)
	if d := s.ActiveDeadlineSeconds; d != nil {
		key = strconv.AppendInt(key, *d, 10)
	}
	key = append(key, " tolerations"...)
	for _, t := range s.Tolerations {
		key = appendSized(key, t.Key, string(t.Operator), t.Value, string(t.Effect))
		if t.TolerationSeconds != nil {
			key = strconv.AppendInt(append(key, '/'), *t.TolerationSeconds, 10)
		}
	}
	*bp = key
	return viewKeys.internKeyFunc(key, func(key string) []corev1.Toleration {
		return []corev1.Toleration{{Key: key}}
	})
}

// viewKeyPrefix starts every syncKey, so that a reader who meets one
// knows what it is.
const viewKeyPrefix = "flotilla.io/view-of"

// appendSized appends each of strs after a space and its length, which
// keeps two strings from reading as two others.
func appendSized(b []byte, strs ...string) []byte {
	for _, s := range strs {
		b = strconv.AppendInt(append(b, ' '), int64(len(s)), 10)
		b = append(append(b, ':'), s...)
	}
	return b
}

var viewKeys = table[[]corev1.Toleration]{limit: 1024}

// IsVirtualKubeletView reports whether pod is a view virtual-kubelet was handed.
func IsVirtualKubeletView(pod *corev1.Pod) bool { return pod.Spec.SchedulerName == viewMarker }

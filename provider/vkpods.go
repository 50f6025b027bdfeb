package provider

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// PodInformerForVirtualKubelet is the host pod informer as virtual-kubelet's
// pod controller must get it: its lister returns views (vkView), private
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
func (v viewHandler) OnDelete(obj any)            { v.h.OnDelete(viewOf(obj)) }

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
		return vkView(o)
	case cache.DeletedFinalStateUnknown:
		if pod, ok := o.Obj.(*corev1.Pod); ok {
			o.Obj = vkView(pod)
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
		pod = vkView(pod)
	}
	return pod, err
}

// viewMarker is the scheduler name of a view, which no pod the apiserver
// holds has (it defaults the field): the provider knows a view when
// virtual-kubelet hands one back, and never forwards it.
const viewMarker = "flotilla.io/virtual-kubelet-view"

// vkView is a copy of pod with all of its metadata and status and, of its
// spec, what virtual-kubelet reads: the fields it compares to decide on an
// update (containers by name and image, active deadline, tolerations; see
// node/pod.go podsEqual), the restart policy and the node. Status updates
// virtual-kubelet writes from a view keep the pod's spec: the pods/status
// endpoint takes the spec from the stored pod.
//
// The copy is shallow: its maps and slices (labels, annotations, owner
// references, conditions, container statuses, tolerations) are the cached
// pod's. virtual-kubelet writes only top-level fields of a pod it was
// given (resource version, phase, reason, message), which are the view's
// own, and nothing writes into a cached pod's maps or slices.
func vkView(pod *corev1.Pod) *corev1.Pod {
	s := &pod.Spec
	v := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta, Status: pod.Status}
	v.Spec = corev1.PodSpec{
		NodeName:              s.NodeName,
		SchedulerName:         viewMarker,
		RestartPolicy:         s.RestartPolicy,
		Containers:            viewContainers(s.Containers),
		ActiveDeadlineSeconds: s.ActiveDeadlineSeconds,
		Tolerations:           s.Tolerations,
	}
	if s.InitContainers != nil {
		v.Spec.InitContainers = viewContainers(s.InitContainers)
	}
	if s.EphemeralContainers != nil {
		v.Spec.EphemeralContainers = make([]corev1.EphemeralContainer, len(s.EphemeralContainers))
		for i, c := range s.EphemeralContainers {
			v.Spec.EphemeralContainers[i].Name = c.Name
			v.Spec.EphemeralContainers[i].Image = c.Image
		}
	}
	return v
}

// viewContainers are the containers of a view, by name and image: the
// views of a workload's pods, which virtual-kubelet keeps, share them.
func viewContainers(cs []corev1.Container) []corev1.Container {
	var key strings.Builder
	for _, c := range cs {
		key.WriteString(c.Name)
		key.WriteByte(0)
		key.WriteString(c.Image)
		key.WriteByte(0)
	}
	return viewContainerLists.internFunc(key.String(), func() []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Image: c.Image}
		}
		return out
	})
}

var viewContainerLists = table[[]corev1.Container]{limit: 1024}

// isView reports whether pod is a view virtual-kubelet was handed.
func isView(pod *corev1.Pod) bool { return pod.Spec.SchedulerName == viewMarker }

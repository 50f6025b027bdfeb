// This file holds the host pod informer of a process serving several
// virtual nodes, and each node's share of it.

package podcache

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// A flotilla-node process watches the host pods of all its virtual nodes
// with one informer. Serving one node, it asks the apiserver for that
// node's pods only (spec.nodeName=<node>). Serving several, it cannot: a
// field selector has no "in", so it watches every bound pod of the host
// (spec.nodeName!=) and keeps a pod bound to a node of another process as
// a stub, its name and node, rather than one watch per node. Each virtual
// node's provider and virtual-kubelet pod controller see the shared
// informer through NodePodInformer, as if it held that node's pods alone.

// nodeNameIndex indexes the host pods by the node they are bound to.
const nodeNameIndex = "flotilla.io/node-name"

// HostPodSelector is the field selector of the process's host pod informer.
func HostPodSelector(nodes []string) string {
	if len(nodes) == 1 {
		return "spec.nodeName=" + nodes[0]
	}
	return "spec.nodeName!="
}

// HostPodsTransform is the transform of the process's host pod informer:
// HostPodTransform for the pods of its nodes, a stub for any other. A new
// version of a pod of its nodes shares with the version cached what did
// not change (shareUnchanged); cached returns the informer's store, or
// nil while there is none.
func HostPodsTransform(nodes []string, cached func() cache.Store) cache.TransformFunc {
	ours := sets.New(nodes...)
	return func(obj any) (any, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return HostPodTransform(obj)
		}
		if ours.Has(pod.Spec.NodeName) {
			StripManagedFields(pod)
			sharePrev(pod, cachedPod(cached, pod), trimHostSpec)
			return pod, nil
		}
		stub := &corev1.Pod{TypeMeta: pod.TypeMeta, Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName}}
		stub.Namespace, stub.Name, stub.UID, stub.ResourceVersion = pod.Namespace, pod.Name, pod.UID, pod.ResourceVersion
		return stub, nil
	}
}

// IndexHostPodsByNode adds the index NodePodInformer reads; call it once,
// before the informer starts.
func IndexHostPodsByNode(inf corev1informers.PodInformer) error {
	return inf.Informer().AddIndexers(cache.Indexers{nodeNameIndex: func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			return []string{pod.Spec.NodeName}, nil
		}
		return nil, nil
	}})
}

// NodePodInformer is the process's host pod informer as the virtual node
// node sees it: handlers are called for, and listers return, the pods bound
// to node only. Indexes added through it are the shared informer's, and
// must have names of the node's own.
func NodePodInformer(shared corev1informers.PodInformer, node string) corev1informers.PodInformer {
	return nodePodInformer{shared: shared, node: node}
}

type nodePodInformer struct {
	shared corev1informers.PodInformer
	node   string
}

func (i nodePodInformer) Informer() cache.SharedIndexInformer {
	onNode := onNode(i.node)
	return handlerWrapping{SharedIndexInformer: i.shared.Informer(), wrap: func(h cache.ResourceEventHandler) cache.ResourceEventHandler {
		return cache.FilteringResourceEventHandler{FilterFunc: onNode, Handler: h}
	}}
}

func (i nodePodInformer) Lister() corev1listers.PodLister {
	return nodePodLister{indexer: i.shared.Informer().GetIndexer(), node: i.node}
}

func onNode(node string) func(any) bool {
	return func(obj any) bool {
		pod, ok := LastState(obj).(*corev1.Pod)
		return ok && pod.Spec.NodeName == node
	}
}

// handlerWrapping is an informer that hands each handler registered on it
// to wrap first, so that a reader of a shared informer sees its events
// through a filter or as views.
type handlerWrapping struct {
	cache.SharedIndexInformer
	wrap func(cache.ResourceEventHandler) cache.ResourceEventHandler
}

func (i handlerWrapping) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(i.wrap(h))
}

func (i handlerWrapping) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(i.wrap(h), resync)
}

func (i handlerWrapping) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(i.wrap(h), o)
}

// nodePodLister lists the pods of its node.
type nodePodLister struct {
	indexer cache.Indexer
	node    string
}

func (l nodePodLister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	objs, err := l.indexer.ByIndex(nodeNameIndex, l.node)
	if err != nil {
		return nil, err
	}
	return matching(objs, l.node, selector), nil
}

func (l nodePodLister) Pods(namespace string) corev1listers.PodNamespaceLister {
	return nodePodNamespaceLister{nodePodLister: l, namespace: namespace}
}

type nodePodNamespaceLister struct {
	nodePodLister
	namespace string
}

func (l nodePodNamespaceLister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	objs, err := l.indexer.ByIndex(cache.NamespaceIndex, l.namespace)
	if err != nil {
		return nil, err
	}
	return matching(objs, l.node, selector), nil
}

func (l nodePodNamespaceLister) Get(name string) (*corev1.Pod, error) {
	obj, exists, err := l.indexer.GetByKey(l.namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !exists || !ok || pod.Spec.NodeName != l.node {
		return nil, apierrors.NewNotFound(corev1.Resource("pod"), name)
	}
	return pod, nil
}

func matching(objs []any, node string, selector labels.Selector) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == node && selector.Matches(labels.Set(pod.Labels)) {
			out = append(out, pod)
		}
	}
	return out
}

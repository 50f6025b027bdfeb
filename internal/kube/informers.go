package kube

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
)

// Factory shares one informer per type of a cluster, as client-go's
// shared informer factory does, for the types flotilla-node watches.
type Factory struct {
	client    Interface
	transform cache.TransformFunc
	tweak     func(*metav1.ListOptions)

	mu        sync.Mutex
	informers map[reflect.Type]cache.SharedIndexInformer
	started   map[reflect.Type]bool
	wg        sync.WaitGroup
	shutdown  bool
	// reconnected are called when a link comes back (OnReconnect).
	reconnected []func()
}

// Option configures a Factory.
type Option func(*Factory)

// WithTransform sets the transform of every informer of the factory.
func WithTransform(t cache.TransformFunc) Option { return func(f *Factory) { f.transform = t } }

// WithTweakListOptions changes the list and watch options of the
// factory's typed informers (not those InformerFor builds with its own
// function).
func WithTweakListOptions(t func(*metav1.ListOptions)) Option {
	return func(f *Factory) { f.tweak = t }
}

// NewFactory returns a factory of informers over c, with no resync.
func NewFactory(c Interface, opts ...Option) *Factory {
	f := &Factory{client: c, informers: map[reflect.Type]cache.SharedIndexInformer{}, started: map[reflect.Type]bool{}}
	for _, o := range opts {
		o(f)
	}
	return f
}

// InformerFor returns the factory's informer of obj's type, built by
// newInformer the first time.
func (f *Factory) InformerFor(obj runtime.Object, newInformer func(Interface) cache.SharedIndexInformer) cache.SharedIndexInformer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := reflect.TypeOf(obj)
	if inf, ok := f.informers[t]; ok {
		return inf
	}
	inf := newInformer(f.client)
	if f.transform != nil {
		_ = inf.SetTransform(f.transform) // not started yet: cannot fail
	}
	f.informers[t] = inf
	return inf
}

// Start runs the informers not started yet until stop is closed.
func (f *Factory) Start(stop <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown {
		return
	}
	for t, inf := range f.informers {
		if !f.started[t] {
			f.wg.Go(func() { inf.Run(stop) })
			f.started[t] = true
		}
	}
}

// WaitForCacheSync waits until every started informer has synced or stop
// is closed.
func (f *Factory) WaitForCacheSync(stop <-chan struct{}) bool {
	f.mu.Lock()
	var synced []cache.InformerSynced
	for t, inf := range f.informers {
		if f.started[t] {
			synced = append(synced, inf.HasSynced)
		}
	}
	f.mu.Unlock()
	return cache.WaitForCacheSync(stop, synced...)
}

// Shutdown waits for the started informers to stop (their stop channel
// must be closed) and starts no more.
func (f *Factory) Shutdown() {
	f.mu.Lock()
	f.shutdown = true
	f.mu.Unlock()
	f.wg.Wait()
}

// OnReconnect adds fn to what is called each time a list or watch of one
// of the factory's typed informers, having found the apiserver
// unreachable, finds it answering again (see reconnect.go): the link is
// back, and what was read of the cluster before it went may be stale. It
// is called once per waiting informer, so it should be quick and
// idempotent: mark something to re-read, say.
func (f *Factory) OnReconnect(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reconnected = append(f.reconnected, fn)
}

// reconnect calls the functions OnReconnect added.
func (f *Factory) reconnect() {
	f.mu.Lock()
	fns := append([]func(){}, f.reconnected...)
	f.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// namespaced is the index client-go's informers keep, which listers use
// to list one namespace. Each informer needs a map of its own: the
// informer keeps the map it is given and adds later indexes to it.
func namespaced() cache.Indexers {
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
}

// typed returns the factory's informer of obj's type, with the factory's
// list options.
func (f *Factory) typed(obj runtime.Object) cache.SharedIndexInformer {
	return f.InformerFor(obj, func(c Interface) cache.SharedIndexInformer {
		return newInformer(c, obj, metav1.NamespaceAll, 0, f.tweak, namespaced(), f.reconnect)
	})
}

// NewInformer returns an informer of obj's type (a type flotilla-node
// watches) in namespace, its lists and watches changed by tweak. While
// the apiserver cannot be reached, its lists and watches wait for it
// rather than fail (see reconnect.go).
func NewInformer(c Interface, obj runtime.Object, namespace string, resync time.Duration, tweak func(*metav1.ListOptions), indexers cache.Indexers) cache.SharedIndexInformer {
	return newInformer(c, obj, namespace, resync, tweak, indexers, nil)
}

// newInformer is NewInformer calling reconnected, when set, each time
// the apiserver answers again after a list or watch could not reach it.
func newInformer(c Interface, obj runtime.Object, namespace string, resync time.Duration, tweak func(*metav1.ListOptions), indexers cache.Indexers, reconnected func()) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(newListWatch(c, obj, namespace, tweak, reconnected), obj, resync, indexers)
}

// NewListWatch returns the lists and watches of obj's type (a type
// flotilla-node watches) in namespace, changed by tweak, for an informer
// of client-go's own making; they wait for an unreachable apiserver as
// NewInformer's do.
func NewListWatch(c Interface, obj runtime.Object, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	return newListWatch(c, obj, namespace, tweak, nil)
}

func newListWatch(c Interface, obj runtime.Object, namespace string, tweak func(*metav1.ListOptions), reconnected func()) cache.ListerWatcher {
	list, watchFn := listWatch(c, obj, namespace)
	wait := notifying(reachable(c), reconnected)
	list, watchFn = waitingList(list, wait), waitingWatch(watchFn, wait)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&o)
			}
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if tweak != nil {
				tweak(&o)
			}
			return watchFn(ctx, o)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, c)
}

type (
	listFunc  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)
)

// lister adapts a typed List to listFunc.
func lister[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error)) listFunc {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) }
}

// listWatch is the List and Watch of obj's type; a type not listed here
// is a programming error.
func listWatch(c Interface, obj runtime.Object, ns string) (listFunc, watchFunc) {
	core := c.CoreV1()
	switch obj.(type) {
	case *corev1.Pod:
		return lister(core.Pods(ns).List), core.Pods(ns).Watch
	case *corev1.Node:
		return lister(core.Nodes().List), core.Nodes().Watch
	case *corev1.Namespace:
		return lister(core.Namespaces().List), core.Namespaces().Watch
	case *corev1.Service:
		return lister(core.Services(ns).List), core.Services(ns).Watch
	case *corev1.Secret:
		return lister(core.Secrets(ns).List), core.Secrets(ns).Watch
	case *corev1.ConfigMap:
		return lister(core.ConfigMaps(ns).List), core.ConfigMaps(ns).Watch
	case *corev1.ServiceAccount:
		return lister(core.ServiceAccounts(ns).List), core.ServiceAccounts(ns).Watch
	case *corev1.Event:
		return lister(core.Events(ns).List), core.Events(ns).Watch
	case *corev1.PersistentVolume:
		return lister(core.PersistentVolumes().List), core.PersistentVolumes().Watch
	case *corev1.PersistentVolumeClaim:
		return lister(core.PersistentVolumeClaims(ns).List), core.PersistentVolumeClaims(ns).Watch
	case *storagev1.StorageClass:
		s := c.StorageV1().StorageClasses()
		return lister(s.List), s.Watch
	case *discoveryv1.EndpointSlice:
		s := c.DiscoveryV1().EndpointSlices(ns)
		return lister(s.List), s.Watch
	}
	panic(fmt.Sprintf("kube: no informer for %T", obj))
}

// The typed informers, as client-go's informers/core/v1 and storage/v1
// give them (the interfaces virtual-kubelet takes).

func (f *Factory) Pods() coreinformers.PodInformer {
	return typedInformer[corelisters.PodLister]{f.typed(&corev1.Pod{}), corelisters.NewPodLister}
}
func (f *Factory) Nodes() coreinformers.NodeInformer {
	return typedInformer[corelisters.NodeLister]{f.typed(&corev1.Node{}), corelisters.NewNodeLister}
}
func (f *Factory) Namespaces() coreinformers.NamespaceInformer {
	return typedInformer[corelisters.NamespaceLister]{f.typed(&corev1.Namespace{}), corelisters.NewNamespaceLister}
}
func (f *Factory) Services() coreinformers.ServiceInformer {
	return typedInformer[corelisters.ServiceLister]{f.typed(&corev1.Service{}), corelisters.NewServiceLister}
}
func (f *Factory) Secrets() coreinformers.SecretInformer {
	return typedInformer[corelisters.SecretLister]{f.typed(&corev1.Secret{}), corelisters.NewSecretLister}
}
func (f *Factory) ConfigMaps() coreinformers.ConfigMapInformer {
	return typedInformer[corelisters.ConfigMapLister]{f.typed(&corev1.ConfigMap{}), corelisters.NewConfigMapLister}
}
func (f *Factory) ServiceAccounts() coreinformers.ServiceAccountInformer {
	return typedInformer[corelisters.ServiceAccountLister]{f.typed(&corev1.ServiceAccount{}), corelisters.NewServiceAccountLister}
}
func (f *Factory) PersistentVolumes() coreinformers.PersistentVolumeInformer {
	return typedInformer[corelisters.PersistentVolumeLister]{f.typed(&corev1.PersistentVolume{}), corelisters.NewPersistentVolumeLister}
}
func (f *Factory) PersistentVolumeClaims() coreinformers.PersistentVolumeClaimInformer {
	return typedInformer[corelisters.PersistentVolumeClaimLister]{f.typed(&corev1.PersistentVolumeClaim{}), corelisters.NewPersistentVolumeClaimLister}
}
func (f *Factory) StorageClasses() storageinformers.StorageClassInformer {
	return typedInformer[storagelisters.StorageClassLister]{f.typed(&storagev1.StorageClass{}), storagelisters.NewStorageClassLister}
}

// SecretInformer gives inf, an informer of Secrets (NewInformer),
// client-go's typed interface.
func SecretInformer(inf cache.SharedIndexInformer) coreinformers.SecretInformer {
	return typedInformer[corelisters.SecretLister]{inf, corelisters.NewSecretLister}
}

// ConfigMapInformer gives inf, an informer of ConfigMaps (NewInformer),
// client-go's typed interface.
func ConfigMapInformer(inf cache.SharedIndexInformer) coreinformers.ConfigMapInformer {
	return typedInformer[corelisters.ConfigMapLister]{inf, corelisters.NewConfigMapLister}
}

// typedInformer is an informer with its typed lister L.
type typedInformer[L any] struct {
	inf       cache.SharedIndexInformer
	newLister func(cache.Indexer) L
}

func (i typedInformer[L]) Informer() cache.SharedIndexInformer { return i.inf }
func (i typedInformer[L]) Lister() L                           { return i.newLister(i.inf.GetIndexer()) }

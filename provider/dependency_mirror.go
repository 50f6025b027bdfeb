// This file mirrors the Secrets, ConfigMaps and ServiceAccounts pods use
// into the member, while a forwarded pod uses them.

package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podspec"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/keyqueue"
	"flotilla.io/flotilla/provider/internal/objectwatch"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/mirror"
)

const (
	kindSecret         = mirror.KindSecret
	kindConfigMap      = mirror.KindConfigMap
	kindServiceAccount = mirror.KindServiceAccount

	// rootCAConfigMap is published into every namespace by each cluster's
	// own controller-manager. A pod in the member talks to the member's
	// apiserver, so the member's copy is the right one: never mirrored.
	rootCAConfigMap = podspec.RootCAConfigMap
	// defaultServiceAccount exists in every member namespace, made by the
	// member's controller-manager; host admission already copied its image
	// pull secrets into the pod.
	defaultServiceAccount = "default"

	// dependencyIndex, followed by the node name, indexes this node's live
	// member pods by the objects they use ("<namespace>/<kind>/<name>").
	dependencyIndex = "flotilla.io/dependencies-"
	// hostDependencyIndex, followed by the node name, indexes the live
	// host pods bound to this node in the same way, in their host
	// namespace. The host pod informer is the process's, shared by its
	// virtual nodes, so each adds an index of its own.
	hostDependencyIndex = "flotilla.io/host-dependencies-"
	// mirrorResync is how often every mirrored object is looked at again
	// without a change: the safety net for a last user that went away
	// without a member pod event (a host pod that failed after its member
	// pod was deleted out of band, or a forward that failed for good).
	mirrorResync = time.Minute
	// dependencyWorkers is how many goroutines sync mirrored objects.
	dependencyWorkers = 4
)

// dependencies mirrors the ConfigMaps, Secrets and ServiceAccounts that
// forwarded pods use into their member namespace, keeps the copies current
// and deletes them once no pod of this virtual node uses them.
//
// Whether an object is still used is computed from the caches every time
// (level based), never counted: a copy is kept while a live member pod of
// this node uses it, a mirrored ServiceAccount names it as an image pull
// secret, or a host pod bound to this node that has no member pod yet
// needs it (it is being forwarded, or waits for another object).
type dependencies struct {
	env   *env
	fwd   lifecycle
	queue workqueue.TypedRateLimitingInterface[string]
	kinds map[string]mirror.Mirrorer
	// host watches, one at a time, the host objects that the host pods
	// bound to this node use (dependency_watch.go).
	host *objectwatch.Set

	memberPods cache.Indexer
	index      string
	// hostPods indexes the host pods by the objects they use (hostIndex).
	hostPods  cache.Indexer
	hostIndex string
	synced    []cache.InformerSynced
}

// newDependencies registers what mirroring needs: on MemberInformers only
// the member copies of this installation (selected by label, so the
// member's other Secrets are never cached; the virtual nodes of one
// process may share the informers, each keeps to its own copies), and in
// the host a watch of each object the host pods of this node use, never
// an informer of a whole kind: a node may read only those (see
// dependency_watch.go).
func newDependencies(e *env, fwd lifecycle) (*dependencies, error) {
	d := &dependencies{
		env: e, fwd: fwd,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dependencies"}),
	}
	copies := d.initMemberCopies()
	d.initHostObjects()
	d.initKinds(copies)
	if err := d.initPodIndexes(); err != nil {
		return nil, err
	}
	d.synced = []cache.InformerSynced{d.env.cfg.MemberInformers.Pods().Informer().HasSynced,
		copies[kindSecret].HasSynced, copies[kindConfigMap].HasSynced, copies[kindServiceAccount].HasSynced}
	if err := d.watchMemberPods(); err != nil {
		return nil, err
	}
	if err := d.watchMemberCopies(copies); err != nil {
		return nil, err
	}
	if err := d.holdHostObjects(); err != nil {
		return nil, err
	}
	return d, nil
}

// informers holds an informer per kind of dependency.
type informers map[string]cache.SharedIndexInformer

// initMemberCopies registers the informers of this installation's member
// copies. The member factory holds one informer per type: these filtered
// ones are the factory's Secret, ConfigMap and ServiceAccount informers.
func (d *dependencies) initMemberCopies() informers {
	selector := wellknown.InstallationSelector(d.env.cfg.Installation).String()
	own := func(obj runtime.Object) cache.SharedIndexInformer {
		return d.env.cfg.MemberInformers.InformerFor(obj, func(c kube.Interface) cache.SharedIndexInformer {
			return kube.NewInformer(c, obj, metav1.NamespaceAll, mirrorResync,
				func(o *metav1.ListOptions) { o.LabelSelector = selector },
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		})
	}
	return informers{kindSecret: own(&corev1.Secret{}), kindConfigMap: own(&corev1.ConfigMap{}), kindServiceAccount: own(&corev1.ServiceAccount{})}
}

// initKinds makes the mirror of each kind, from the host's object (with
// its data, overridden for the cluster) to this node's member copy.
func (d *dependencies) initKinds(copies informers) {
	e := d.env
	secrets := corev1listers.NewSecretLister(copies[kindSecret].GetIndexer())
	configMaps := corev1listers.NewConfigMapLister(copies[kindConfigMap].GetIndexer())
	sas := corev1listers.NewServiceAccountLister(copies[kindServiceAccount].GetIndexer())
	owns := func(o metav1.Object) bool { return e.ours(o) }
	d.kinds = map[string]mirror.Mirrorer{
		kindSecret: mirror.SecretMirror(e.cfg.MemberClient,
			func(_ context.Context, ns, n string) (*corev1.Secret, error) {
				obj, err := hostObject[*corev1.Secret](d, kindSecret, ns, n)
				if err != nil {
					return nil, err
				}
				return overridden(e, obj, "Secret")
			},
			func(ns, n string) (*corev1.Secret, error) {
				return ownCopy[*corev1.Secret](e, kindSecret, n)(secrets.Secrets(ns).Get(n))
			}, owns),
		kindConfigMap: mirror.ConfigMapMirror(e.cfg.MemberClient,
			func(_ context.Context, ns, n string) (*corev1.ConfigMap, error) {
				obj, err := hostObject[*corev1.ConfigMap](d, kindConfigMap, ns, n)
				if err != nil {
					return nil, err
				}
				return overridden(e, obj, "ConfigMap")
			},
			func(ns, n string) (*corev1.ConfigMap, error) {
				return ownCopy[*corev1.ConfigMap](e, kindConfigMap, n)(configMaps.ConfigMaps(ns).Get(n))
			}, owns),
		kindServiceAccount: mirror.ServiceAccountMirror(e.cfg.MemberClient,
			func(_ context.Context, ns, n string) (*corev1.ServiceAccount, error) {
				obj, err := hostObject[*corev1.ServiceAccount](d, kindServiceAccount, ns, n)
				if err != nil {
					return nil, err
				}
				return overridden(e, obj, "ServiceAccount")
			},
			func(ns, n string) (*corev1.ServiceAccount, error) {
				return ownCopy[*corev1.ServiceAccount](e, kindServiceAccount, n)(sas.ServiceAccounts(ns).Get(n))
			}, owns),
	}
}

// initPodIndexes indexes the member and the host pods by the objects they
// use, under names of this node's own (the informers may be shared).
func (d *dependencies) initPodIndexes() error {
	pods := d.env.cfg.MemberInformers.Pods().Informer()
	d.index = dependencyIndex + d.env.cfg.NodeName
	if err := pods.AddIndexers(cache.Indexers{d.index: d.indexMemberPod}); err != nil {
		return fmt.Errorf("index member pods by dependency: %w", err)
	}
	d.memberPods = pods.GetIndexer()
	hostPods := d.env.cfg.HostPods.Informer()
	d.hostIndex = hostDependencyIndex + d.env.cfg.NodeName
	if err := hostPods.AddIndexers(cache.Indexers{d.hostIndex: d.indexHostPod}); err != nil {
		return fmt.Errorf("index host pods by dependency: %w", err)
	}
	d.hostPods = hostPods.GetIndexer()
	return nil
}

// watchMemberPods looks again at what a member pod used when it stops or
// goes away, it may have been an object's last user, and when it gains
// ephemeral containers.
func (d *dependencies) watchMemberPods() error {
	_, err := d.env.cfg.MemberInformers.Pods().Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: d.env.ours,
		Handler: cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, cur any) {
				o, ok1 := memberpod.Of(old)
				c, ok2 := memberpod.Of(cur)
				if ok1 && ok2 && !o.Terminal() && c.Terminal() {
					d.enqueuePodDependencies(c)
				}
				// An ephemeral container added (syncEphemeral) may use what
				// its copy was mirrored for a moment before, and a sync in
				// between, from a cache without it, found the copy unused.
				if ok1 && ok2 && len(c.Spec.EphemeralContainers) != len(o.Spec.EphemeralContainers) {
					d.enqueuePodDependencies(c)
				}
			},
			DeleteFunc: func(obj any) {
				if pod, ok := memberpod.Of(obj); ok {
					d.enqueuePodDependencies(pod)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("watch member pods: %w", err)
	}
	return nil
}

// watchMemberCopies repairs edits and deletions made in the member, and
// garbage-collects at start-up and every mirrorResync.
func (d *dependencies) watchMemberCopies(copies informers) error {
	for _, kind := range []string{kindSecret, kindConfigMap, kindServiceAccount} {
		if _, err := copies[kind].AddEventHandler(cache.FilteringResourceEventHandler{
			FilterFunc: d.env.ours,
			Handler: cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { d.enqueueMirror(kind, obj) },
				UpdateFunc: func(_, cur any) { d.enqueueMirror(kind, cur) },
				DeleteFunc: func(obj any) { d.enqueueMirror(kind, obj) },
			},
		}); err != nil {
			return fmt.Errorf("watch member %ss: %w", kind, err)
		}
	}
	return nil
}

// ownCopy passes on a cached member copy only if it is this node's: another
// virtual node's copy of the same name is as foreign as the member's own.
func ownCopy[T metav1.Object](e *env, kind, name string) func(T, error) (T, error) {
	return func(obj T, err error) (T, error) {
		if err == nil && !e.ours(obj) {
			var zero T
			return zero, apierrors.NewNotFound(corev1.Resource(strings.ToLower(kind)+"s"), name)
		}
		return obj, err
	}
}

func dependencyKey(kind, hostNS, name string) string { return kind + "/" + hostNS + "/" + name }

func (d *dependencies) enqueuePodDependencies(pod *memberpod.Pod) {
	hostNS := pod.Annotations[wellknown.HostNamespaceAnnotation]
	if hostNS == "" {
		return
	}
	for _, dep := range podDependencies(pod.Spec, nil) {
		d.queue.Add(dependencyKey(dep.kind, hostNS, dep.name))
	}
}

func objectOf(obj any) metav1.Object {
	m, _ := podcache.LastState(obj).(metav1.Object)
	return m
}

func (d *dependencies) enqueueMirror(kind string, obj any) {
	m := objectOf(obj)
	if m == nil {
		return
	}
	hostNS := m.GetAnnotations()[wellknown.HostNamespaceAnnotation]
	if hostNS == "" {
		return
	}
	d.queue.Add(dependencyKey(kind, hostNS, m.GetName()))
}

// run syncs mirrored objects, and watches the host objects in use, until
// ctx ends. It waits for the caches first: an incomplete member pod cache
// would make used objects look unused.
func (d *dependencies) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { d.host.Run(ctx) })
	keyqueue.RunSynced(ctx, d.queue, d.synced, dependencyWorkers, d.sync)
	wg.Wait()
}

// sync brings the member copy of one host object in line with the host
// object and its users: deleted when unused, created or updated when used.
// A used object deleted in the host keeps its last member copy, as a
// kubelet keeps the last content of a mounted Secret, and so does one no
// host pod of this node uses any more while a member pod still does (its
// host pod was deleted): it is not watched, and goes with the member pod.
func (d *dependencies) sync(ctx context.Context, key string) error {
	kind, rest, _ := strings.Cut(key, "/")
	hostNS, name, _ := strings.Cut(rest, "/")
	k, ok := d.kinds[kind]
	if !ok {
		return nil
	}
	t := d.env.target(hostNS)
	ref := objectRef{kind: kind, name: name}
	if !d.needed(ref, hostNS, t.Namespace) {
		if err := k.Remove(ctx, t.Namespace, name); err != nil {
			return fmt.Errorf("delete unused %s %s/%s in cluster %s: %w", kind, t.Namespace, name, t.Cluster, err)
		}
		return nil
	}
	out, err := k.Apply(ctx, hostNS, name, t)
	switch {
	case errors.Is(err, objectwatch.ErrNotWatched):
		return nil
	case apierrors.IsNotFound(err) || transient.NamespaceTerminating(err):
		return nil // no member namespace (yet, or any more): forwarding creates it and mirrors again
	case err != nil:
		return fmt.Errorf("mirror %s %s/%s into cluster %s: %w", kind, t.Namespace, name, t.Cluster, err)
	case out == mirror.NotOwned:
		log.G(ctx).WithField("object", key).Debug("member object of that name is not flotilla's, left alone")
	}
	return nil
}

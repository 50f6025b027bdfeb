// This file mirrors the Secrets, ConfigMaps and ServiceAccounts pods use
// into the member, while a forwarded pod uses them.

package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podspec"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/keyqueue"
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
	// secrets and configMaps read the data the host caches leave out.
	secrets    *podcache.HostContents[*corev1.Secret]
	configMaps *podcache.HostContents[*corev1.ConfigMap]
	kinds      map[string]mirror.Mirrorer

	hostSAs     corev1listers.ServiceAccountLister
	mirroredSAs corev1listers.ServiceAccountLister
	memberPods  cache.Indexer
	index       string
	// hostPods indexes the host pods by the objects they use (hostIndex).
	hostPods  cache.Indexer
	hostIndex string
	synced    []cache.InformerSynced
}

// newDependencies registers the informers mirroring needs: the host's
// Secrets, ConfigMaps and ServiceAccounts on HostInformers, and on
// MemberInformers only the member copies of this installation (selected by
// label, so the member's other Secrets are never cached; the virtual nodes
// of one process may share the informers, each keeps to its own copies).
func newDependencies(e *env, fwd lifecycle) (*dependencies, error) {
	if e.cfg.HostInformers == nil {
		return nil, errors.New("provider: HostInformers is required")
	}
	d := &dependencies{
		env: e, fwd: fwd,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dependencies"}),
	}
	selector := wellknown.InstallationSelector(e.cfg.Installation).String()
	ownInformer := func(obj runtime.Object) cache.SharedIndexInformer {
		// The member factory holds one informer per type: this filtered one
		// is the factory's Secret (ConfigMap, ServiceAccount) informer.
		return e.cfg.MemberInformers.InformerFor(obj, func(c kube.Interface) cache.SharedIndexInformer {
			return kube.NewInformer(c, obj, metav1.NamespaceAll, mirrorResync,
				func(o *metav1.ListOptions) { o.LabelSelector = selector },
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		})
	}
	mSecrets := ownInformer(&corev1.Secret{})
	mConfigMaps := ownInformer(&corev1.ConfigMap{})
	mSAs := ownInformer(&corev1.ServiceAccount{})
	host := e.cfg.HostInformers
	hSecrets, hConfigMaps, hSAs := host.Secrets(), host.ConfigMaps(), host.ServiceAccounts()
	// The host caches hold Secrets and ConfigMaps without their data
	// (HostObjectTransform); a mirror reads the data of those it copies.
	hostCore := e.cfg.HostClient.CoreV1()
	d.secrets = podcache.NewHostContents(func(ctx context.Context, ns, n string) (*corev1.Secret, error) {
		return hostCore.Secrets(ns).Get(ctx, n, metav1.GetOptions{})
	})
	d.configMaps = podcache.NewHostContents(func(ctx context.Context, ns, n string) (*corev1.ConfigMap, error) {
		return hostCore.ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{})
	})

	secrets, configMaps, sas := corev1listers.NewSecretLister(mSecrets.GetIndexer()),
		corev1listers.NewConfigMapLister(mConfigMaps.GetIndexer()), corev1listers.NewServiceAccountLister(mSAs.GetIndexer())
	owns := func(o metav1.Object) bool { return e.ours(o) }
	d.kinds = map[string]mirror.Mirrorer{
		kindSecret: mirror.SecretMirror(e.cfg.MemberClient,
			func(ctx context.Context, ns, n string) (*corev1.Secret, error) {
				obj, err := hSecrets.Lister().Secrets(ns).Get(n)
				if err == nil {
					obj, err = d.secrets.Of(ctx, obj)
				}
				if err != nil {
					return nil, err
				}
				return overridden(e, obj, "Secret")
			},
			func(ns, n string) (*corev1.Secret, error) {
				return ownCopy[*corev1.Secret](e, kindSecret, n)(secrets.Secrets(ns).Get(n))
			}, owns),
		kindConfigMap: mirror.ConfigMapMirror(e.cfg.MemberClient,
			func(ctx context.Context, ns, n string) (*corev1.ConfigMap, error) {
				obj, err := hConfigMaps.Lister().ConfigMaps(ns).Get(n)
				if err == nil {
					obj, err = d.configMaps.Of(ctx, obj)
				}
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
				obj, err := hSAs.Lister().ServiceAccounts(ns).Get(n)
				if err != nil {
					return nil, err
				}
				return overridden(e, obj, "ServiceAccount")
			},
			func(ns, n string) (*corev1.ServiceAccount, error) {
				return ownCopy[*corev1.ServiceAccount](e, kindServiceAccount, n)(sas.ServiceAccounts(ns).Get(n))
			}, owns),
	}
	d.hostSAs, d.mirroredSAs = hSAs.Lister(), sas

	pods := e.cfg.MemberInformers.Pods().Informer()
	d.index = dependencyIndex + e.cfg.NodeName
	if err := pods.AddIndexers(cache.Indexers{d.index: d.indexMemberPod}); err != nil {
		return nil, fmt.Errorf("index member pods by dependency: %w", err)
	}
	d.memberPods = pods.GetIndexer()
	hostPods := e.cfg.HostPods.Informer()
	d.hostIndex = hostDependencyIndex + e.cfg.NodeName
	if err := hostPods.AddIndexers(cache.Indexers{d.hostIndex: d.indexHostPod}); err != nil {
		return nil, fmt.Errorf("index host pods by dependency: %w", err)
	}
	d.hostPods = hostPods.GetIndexer()
	d.synced = []cache.InformerSynced{pods.HasSynced, mSecrets.HasSynced, mConfigMaps.HasSynced, mSAs.HasSynced,
		hSecrets.Informer().HasSynced, hConfigMaps.Informer().HasSynced, hSAs.Informer().HasSynced}

	// A member pod that stops or goes away may have been an object's last user.
	if _, err := pods.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: e.ours,
		Handler: cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, cur any) {
				o, ok1 := memberpod.Of(old)
				c, ok2 := memberpod.Of(cur)
				if ok1 && ok2 && !o.Terminal() && c.Terminal() {
					d.enqueuePodDependencies(c)
				}
			},
			DeleteFunc: func(obj any) {
				if pod, ok := memberpod.Of(obj); ok {
					d.enqueuePodDependencies(pod)
				}
			},
		},
	}); err != nil {
		return nil, fmt.Errorf("watch member pods: %w", err)
	}
	// Member copies: repair edits and deletions made in the member, and
	// garbage-collect at start-up and every mirrorResync.
	for kind, inf := range map[string]cache.SharedIndexInformer{kindSecret: mSecrets, kindConfigMap: mConfigMaps, kindServiceAccount: mSAs} {
		if _, err := inf.AddEventHandler(cache.FilteringResourceEventHandler{
			FilterFunc: e.ours,
			Handler: cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { d.enqueueMirror(kind, obj) },
				UpdateFunc: func(_, cur any) { d.enqueueMirror(kind, cur) },
				DeleteFunc: func(obj any) { d.enqueueMirror(kind, obj) },
			},
		}); err != nil {
			return nil, fmt.Errorf("watch member %ss: %w", kind, err)
		}
	}
	// Host objects: propagate changes, and forward the pods that waited for
	// an object which has just been created.
	for kind, inf := range map[string]cache.SharedIndexInformer{kindSecret: hSecrets.Informer(), kindConfigMap: hConfigMaps.Informer(), kindServiceAccount: hSAs.Informer()} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				d.enqueueHost(kind, obj)
				if !initial {
					d.forwardWaiting(kind, obj)
				}
			},
			UpdateFunc: func(_, cur any) { d.enqueueHost(kind, cur) },
			DeleteFunc: func(obj any) {
				d.forgetContent(obj)
				d.enqueueHost(kind, obj)
			},
		}); err != nil {
			return nil, fmt.Errorf("watch host %ss: %w", kind, err)
		}
	}
	return d, nil
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

// usedKeys are the index keys of the objects a pod of namespace with spec
// uses.
func usedKeys(namespace string, spec *corev1.PodSpec) []string {
	deps := podDependencies(spec, nil)
	out := make([]string, 0, len(deps))
	for _, dep := range deps {
		out = append(out, namespace+"/"+dep.kind+"/"+dep.name)
	}
	return out
}

// indexMemberPod indexes a live member pod of this node by the objects it uses.
func (d *dependencies) indexMemberPod(obj any) ([]string, error) {
	pod, ok := memberpod.Of(obj)
	if !ok || !d.env.ours(pod) || pod.Terminal() {
		return nil, nil
	}
	return usedKeys(pod.Namespace, pod.Spec), nil
}

// indexHostPod indexes a live host pod bound to this node by the objects it
// uses; a pod using a ServiceAccount is found under the ServiceAccount for
// its image pull secrets too (see waiting).
func (d *dependencies) indexHostPod(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != d.env.cfg.NodeName || pod.DeletionTimestamp != nil || podstate.Terminal(pod) {
		return nil, nil
	}
	return usedKeys(pod.Namespace, &pod.Spec), nil
}

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
	if sa, ok := m.(*corev1.ServiceAccount); ok {
		// Its image pull secrets may have lost their last user with it.
		for _, s := range sa.ImagePullSecrets {
			d.queue.Add(dependencyKey(kindSecret, hostNS, s.Name))
		}
	}
}

func (d *dependencies) enqueueHost(kind string, obj any) {
	if m := objectOf(obj); m != nil {
		d.queue.Add(dependencyKey(kind, m.GetNamespace(), m.GetName()))
	}
}

// forgetContent drops what was read of a host object that is gone.
func (d *dependencies) forgetContent(obj any) {
	switch o := objectOf(obj).(type) {
	case *corev1.Secret:
		d.secrets.Forget(o.UID)
	case *corev1.ConfigMap:
		d.configMaps.Forget(o.UID)
	}
}

// forwardWaiting hands the host pods that wait for a newly created object
// back to the provider's forwarding retries.
func (d *dependencies) forwardWaiting(kind string, obj any) {
	m := objectOf(obj)
	if m == nil {
		return
	}
	for _, pod := range d.waiting(objectRef{kind: kind, name: m.GetName()}, m.GetNamespace()) {
		d.fwd.retry(pod.Namespace + "/" + pod.Name)
	}
}

// hostPodDependencies is what a host pod needs, including the image pull
// secrets of its ServiceAccount.
func (d *dependencies) hostPodDependencies(pod *corev1.Pod) []dependency {
	var pull []corev1.LocalObjectReference
	if sa := pod.Spec.ServiceAccountName; sa != "" && sa != defaultServiceAccount {
		if obj, err := d.hostSAs.ServiceAccounts(pod.Namespace).Get(sa); err == nil {
			pull = obj.ImagePullSecrets
		}
	}
	return podDependencies(&pod.Spec, pull)
}

// waiting returns the host pods bound to this node, not finished or being
// deleted, that have no member pod yet and need ref. They are looked up in
// the host pod index among the pods that use ref, directly or, for an image
// pull secret, through their ServiceAccount.
func (d *dependencies) waiting(ref objectRef, hostNS string) []*corev1.Pod {
	keys := []string{hostNS + "/" + ref.kind + "/" + ref.name}
	if ref.kind == kindSecret {
		sas, _ := d.hostSAs.ServiceAccounts(hostNS).List(labels.Everything())
		for _, sa := range sas {
			if sa.Name != defaultServiceAccount &&
				slices.ContainsFunc(sa.ImagePullSecrets, func(s corev1.LocalObjectReference) bool { return s.Name == ref.name }) {
				keys = append(keys, hostNS+"/"+kindServiceAccount+"/"+sa.Name)
			}
		}
	}
	memberNS := d.env.target(hostNS).Namespace
	var out []*corev1.Pod
	found := map[types.UID]bool{}
	for _, key := range keys {
		objs, err := d.hostPods.ByIndex(d.hostIndex, key)
		if err != nil {
			continue
		}
		for _, obj := range objs {
			pod, ok := obj.(*corev1.Pod)
			if !ok || found[pod.UID] {
				continue
			}
			found[pod.UID] = true
			if m, err := d.env.memberPods.Get(memberNS, pod.Name); err == nil && d.env.ours(m) && m.HostUID == pod.UID {
				continue // its member pod is counted on the member side
			}
			if slices.ContainsFunc(d.hostPodDependencies(pod), func(x dependency) bool { return x.objectRef == ref }) {
				out = append(out, pod)
			}
		}
	}
	return out
}

// needed reports whether anything of this node still uses the object.
func (d *dependencies) needed(ref objectRef, hostNS, memberNS string) bool {
	if keys, _ := d.memberPods.IndexKeys(d.index, memberNS+"/"+ref.kind+"/"+ref.name); len(keys) > 0 {
		return true
	}
	if ref.kind == kindSecret {
		sas, _ := d.mirroredSAs.ServiceAccounts(memberNS).List(labels.Everything())
		for _, sa := range sas {
			if d.env.ours(sa) && slices.ContainsFunc(sa.ImagePullSecrets, func(s corev1.LocalObjectReference) bool { return s.Name == ref.name }) {
				return true
			}
		}
	}
	return len(d.waiting(ref, hostNS)) > 0
}

// run syncs mirrored objects until ctx ends. It waits for the caches first:
// an incomplete member pod cache would make used objects look unused.
func (d *dependencies) run(ctx context.Context) {
	keyqueue.RunSynced(ctx, d.queue, d.synced, dependencyWorkers, d.sync)
}

// sync brings the member copy of one host object in line with the host
// object and its users: deleted when unused, created or updated when used.
// A used object deleted in the host keeps its last member copy, as a
// kubelet keeps the last content of a mounted Secret.
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
	case apierrors.IsNotFound(err) || transient.NamespaceTerminating(err):
		return nil // no member namespace (yet, or any more): forwarding creates it and mirrors again
	case err != nil:
		return fmt.Errorf("mirror %s %s/%s into cluster %s: %w", kind, t.Namespace, name, t.Cluster, err)
	case out == mirror.NotOwned:
		log.G(ctx).WithField("object", key).Debug("member object of that name is not flotilla's, left alone")
	case out == mirror.Mirrored && kind == kindServiceAccount:
		if sa, err := d.hostSAs.ServiceAccounts(hostNS).Get(name); err == nil {
			for _, s := range sa.ImagePullSecrets {
				d.queue.Add(dependencyKey(kindSecret, hostNS, s.Name))
			}
		}
	}
	return nil
}

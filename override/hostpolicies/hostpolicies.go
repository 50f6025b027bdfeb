// Package hostpolicies is the I/O half of overrides for flotilla-node: it
// reads the host's OverridePolicies and ClusterOverridePolicies, and the
// metadata of the workloads pods belong to, from informer caches, and
// applies them with package override to what is forwarded to a cluster.
package hostpolicies

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/override"
	"flotilla.io/flotilla/provider"
	"flotilla.io/flotilla/workload"
)

var (
	overridePolicies        = policyv1alpha1.GroupVersion.WithResource("overridepolicies")
	clusterOverridePolicies = policyv1alpha1.GroupVersion.WithResource("clusteroverridepolicies")
	podKind                 = corev1.SchemeGroupVersion.WithKind("Pod")
)

// overrides applies the host's override policies to forwarded pods, from
// caches of the policies, of the workloads' metadata and of the virtual
// nodes (whose labels policies target).
type overrides struct {
	policies, clusterPolicies cache.GenericLister
	owners                    map[string]cache.GenericLister
	nodes                     corev1listers.NodeLister
	synced                    func() bool // the policies' caches
	// The workloads' caches start with the first policy the host has
	// (startOwners): until then no pod needs its workload, and a
	// flotilla-node would watch every workload of the host for nothing.
	startOwners  func()
	ownersSynced func() bool
}

var _ provider.Overrides = (*overrides)(nil)

// newOverrides starts the caches overrides need and waits for them. It
// returns nil when the host has no override policy API (flotilla-policy's
// CRDs are not installed): pods are then forwarded as they are.
func newOverrides(ctx context.Context, hostConfig *rest.Config, nodes corev1listers.NodeLister) (*overrides, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(hostConfig)
	if err != nil {
		return nil, err
	}
	resources, err := disc.ServerResourcesForGroupVersion(policyv1alpha1.GroupVersion.String())
	if apierrors.IsNotFound(err) || (err == nil && !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == overridePolicies.Resource })) {
		log.G(ctx).Debug("the host has no override policy API (yet); pods are forwarded without overrides")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", policyv1alpha1.GroupVersion, err)
	}
	dyn, err := dynamic.NewForConfig(hostConfig)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(hostConfig)
	if err != nil {
		return nil, err
	}
	return startOverrides(ctx, dyn, meta, nodes)
}

// startOverrides starts the caches of the policies, and of the workloads'
// metadata once the host has a policy, and waits briefly for the policies.
func startOverrides(ctx context.Context, dyn dynamic.Interface, meta metadata.Interface, nodes corev1listers.NodeLister) (*overrides, error) {
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	mf := metadatainformer.NewSharedInformerFactory(meta, 0)
	o := &overrides{
		policies:        df.ForResource(overridePolicies).Lister(),
		clusterPolicies: df.ForResource(clusterOverridePolicies).Lister(),
		owners:          map[string]cache.GenericLister{},
		nodes:           nodes,
	}
	var ownersSynced []cache.InformerSynced
	for _, a := range workload.Controllers() {
		o.owners[a.GroupVersionKind().Kind] = mf.ForResource(a.Resource()).Lister()
		ownersSynced = append(ownersSynced, mf.ForResource(a.Resource()).Informer().HasSynced)
	}
	o.ownersSynced = allSynced(ownersSynced)
	var once sync.Once
	o.startOwners = func() { once.Do(func() { mf.Start(ctx.Done()) }) }
	var synced []cache.InformerSynced
	for _, r := range []schema.GroupVersionResource{overridePolicies, clusterOverridePolicies} {
		inf := df.ForResource(r).Informer()
		synced = append(synced, inf.HasSynced)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { o.startOwners() }}); err != nil {
			return nil, err
		}
	}
	o.synced = allSynced(synced)
	df.Start(ctx.Done())
	// Waited for briefly, not more: the virtual nodes must register even if
	// the policies cannot be read; pods wait (see Pod) until they can.
	syncCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cache.WaitForCacheSync(syncCtx.Done(), o.synced)
	return o, nil
}

// Pod implements provider.Overrides. Until the policy caches have synced,
// and for a pod in reach of a policy until the workloads' caches have, it
// returns provider.ErrOverridesNotSynced, and the pod is forwarded once
// they have: forwarding it without a policy that targets it could run what
// the policy forbids.
func (o *overrides) Pod(ctx context.Context, host *corev1.Pod, cluster string) (*corev1.Pod, []string, error) {
	if !o.synced() {
		return nil, nil, provider.ErrOverridesNotSynced
	}
	policies, err := o.list(host.Namespace)
	if err != nil || len(policies) == 0 {
		return host, nil, err
	}
	node, err := o.nodes.Get(cluster)
	if err != nil {
		return nil, nil, fmt.Errorf("virtual node %s: %w", cluster, err)
	}
	if !o.ownersSynced() {
		o.startOwners() // started by the first policy's event already
		return nil, nil, provider.ErrOverridesNotSynced
	}
	tpl, err := o.template(ctx, host)
	if err != nil {
		return nil, nil, err
	}
	out, applied, err := override.OverrideObject(host, podKind, tpl, override.ClusterFromNode(node), policies)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(applied))
	for _, r := range applied {
		names = append(names, r.String())
	}
	return out, names, nil
}

// list returns the OverridePolicies of namespace and every
// ClusterOverridePolicy.
func (o *overrides) list(namespace string) ([]override.Policy, error) {
	cops, err := o.clusterPolicies.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	ops, err := o.policies.ByNamespace(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out, err := convert(nil, cops, override.FromClusterOverridePolicy)
	if err != nil {
		return nil, err
	}
	return convert(out, ops, override.FromOverridePolicy)
}

// convert appends to out the policies cached as unstructured objects,
// typed as PT and made override.Policy by from.
func convert[T any, PT interface {
	*T
	runtime.Object
}](out []override.Policy, cached []runtime.Object, from func(PT) override.Policy) ([]override.Policy, error) {
	for _, u := range cached {
		p := PT(new(T))
		if err := fromUnstructured(u, p); err != nil {
			return nil, err
		}
		out = append(out, from(p))
	}
	return out, nil
}

func fromUnstructured(obj runtime.Object, into runtime.Object) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected %T in the policy cache", obj)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// template is what override policies' resource selectors match a pod as:
// its outermost workload by controller reference, or the pod itself.
func (o *overrides) template(ctx context.Context, pod *corev1.Pod) (override.Template, error) {
	owners, err := workload.Owners(ctx, func(_ context.Context, a workload.Adapter, namespace, name string) (metav1.Object, error) {
		obj, err := o.owners[a.GroupVersionKind().Kind].ByNamespace(namespace).Get(name)
		if err != nil {
			return nil, err
		}
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return nil, fmt.Errorf("unexpected %T in the workload metadata cache", obj)
		}
		return m, nil
	}, pod)
	if err != nil {
		return override.Template{}, err
	}
	t := override.Template{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels}
	if len(owners) > 0 {
		top := owners[len(owners)-1]
		gvk := top.Adapter.GroupVersionKind()
		t = override.Template{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: pod.Namespace,
			Name: top.Object.GetName(), Labels: top.Object.GetLabels()}
	}
	return t, nil
}

// overrideAPIPollInterval is how often flotilla-node looks for the override
// policy API when the host did not have it at start.
const overrideAPIPollInterval = 30 * time.Second

// lazyOverrides forwards pods unchanged until the host serves the override
// policy API, so that flotilla-policy may be installed after flotilla-node.
type lazyOverrides struct {
	mu sync.RWMutex
	o  *overrides
}

// Start returns what applies override policies: ready at once when
// the host serves their API, otherwise found by polling in the background.
func Start(ctx context.Context, hostConfig *rest.Config, nodes corev1listers.NodeLister) (provider.Overrides, error) {
	o, err := newOverrides(ctx, hostConfig, nodes)
	if err != nil {
		return nil, err
	}
	l := &lazyOverrides{o: o}
	if o == nil {
		go l.poll(ctx, hostConfig, nodes)
	}
	return l, nil
}

func (l *lazyOverrides) poll(ctx context.Context, hostConfig *rest.Config, nodes corev1listers.NodeLister) {
	t := time.NewTicker(overrideAPIPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o, err := newOverrides(ctx, hostConfig, nodes)
		if err != nil {
			log.G(ctx).WithError(err).Warn("override policies not available yet")
			continue
		}
		if o != nil {
			l.mu.Lock()
			l.o = o
			l.mu.Unlock()
			log.G(ctx).Info("override policies are applied from now on")
			return
		}
	}
}

// Pod implements provider.Overrides.
func (l *lazyOverrides) Pod(ctx context.Context, host *corev1.Pod, cluster string) (*corev1.Pod, []string, error) {
	l.mu.RLock()
	o := l.o
	l.mu.RUnlock()
	if o == nil {
		return host, nil, nil
	}
	return o.Pod(ctx, host, cluster)
}

// Object implements provider.Overrides: a ConfigMap, Secret,
// ServiceAccount or Service is matched as itself.
func (o *overrides) Object(obj runtime.Object, kind string, cluster string) (runtime.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	if !o.synced() {
		return nil, provider.ErrOverridesNotSynced
	}
	policies, err := o.list(m.GetNamespace())
	if err != nil || len(policies) == 0 {
		return obj, err
	}
	node, err := o.nodes.Get(cluster)
	if err != nil {
		return nil, fmt.Errorf("virtual node %s: %w", cluster, err)
	}
	gvk := corev1.SchemeGroupVersion.WithKind(kind)
	t := override.Template{APIVersion: "v1", Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName(), Labels: m.GetLabels()}
	out, _, err := override.OverrideObject(obj, gvk, t, override.ClusterFromNode(node), policies)
	return out, err
}

// Object implements provider.Overrides.
func (l *lazyOverrides) Object(obj runtime.Object, kind string, cluster string) (runtime.Object, error) {
	l.mu.RLock()
	o := l.o
	l.mu.RUnlock()
	if o == nil {
		return obj, nil
	}
	return o.Object(obj, kind, cluster)
}

// allSynced reports whether every one of synced has synced.
func allSynced(synced []cache.InformerSynced) func() bool {
	return func() bool {
		for _, s := range synced {
			if !s() {
				return false
			}
		}
		return true
	}
}

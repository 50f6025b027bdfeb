package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/informers"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
)

var (
	_ node.PodLifecycleHandler = (*Provider)(nil)
	_ node.PodNotifier         = (*Provider)(nil)
)

// Event reasons flotilla records on host pods.
const (
	EventForwardRetrying = "ForwardRetrying"
	EventForwardFailed   = "ForwardFailed"
	// EventOverrideFailed: the override policies for the cluster cannot be
	// applied to the pod (an overrider that does not fit it); it is not
	// forwarded until they are fixed.
	EventOverrideFailed   = "OverrideFailed"
	EventMemberPodDeleted = "MemberPodDeleted"
)

// NamespaceMapper maps a host namespace to the member namespace its pods go to.
type NamespaceMapper func(hostNamespace string) string

// SameName is the namespace mapping for whole clusters: the member namespace
// has the host namespace's name.
func SameName(ns string) string { return ns }

// Config holds the provider's dependencies; all are required but Clock and Namespace.
type Config struct {
	// NodeName is the virtual node (and cluster) this provider serves.
	NodeName string
	// Installation identifies the host cluster (see wellknown.InstallationLabel).
	Installation string
	// HostPods is the informer of the host pods bound to NodeName, the one
	// virtual-kubelet's pod controller watches; the provider adds indexes
	// to it, so it must not have started yet.
	HostPods   corev1informers.PodInformer
	HostClient kubernetes.Interface
	// Recorder records events on host objects.
	Recorder     record.EventRecorder
	MemberClient kubernetes.Interface
	// MemberConfig is used for streaming calls (exec, attach).
	MemberConfig *rest.Config
	// MemberInformers is the member's shared informer factory; the provider
	// registers its pod informer and never starts the factory itself.
	MemberInformers informers.SharedInformerFactory
	Namespace       NamespaceMapper
	// Partition, for a virtual cluster that is a label partition of its
	// member, selects the member nodes its pods may run on (see Confine).
	Partition *metav1.LabelSelector
	Clock     clock.Clock
	// StatusWorkers is how many goroutines push status to the host.
	StatusWorkers int
	// Events, when set, is used to mirror the events of member pods onto
	// their host pods under the member component's name.
	Events record.EventBroadcaster
	// HostInformers is the host's shared informer factory; the provider
	// registers Secret, ConfigMap and ServiceAccount informers (the objects
	// pods depend on, see dependencies.go) and never starts the factory itself.
	HostInformers informers.SharedInformerFactory
	// Overrides, when set, applies the override policies that target this
	// virtual node to each pod before it is translated and forwarded.
	Overrides Overrides
	// Metrics, when set, measures forwarding (see HostPodEvents and PodClient).
	Metrics *Metrics
}

// AppliedOverridesAnnotation on a host pod lists the override policies
// applied to it for its cluster, comma-separated: namespace/name for an
// OverridePolicy, name for a ClusterOverridePolicy.
const AppliedOverridesAnnotation = "policy.flotilla.io/applied-overrides"

// ErrOverridesNotSynced is returned by Overrides while the override
// policies cannot be read yet; forwarding is retried.
var ErrOverridesNotSynced = fmt.Errorf("override policies not read yet: %w", errRetry)

// Overrides applies OverridePolicies and ClusterOverridePolicies to a pod
// forwarded to a cluster.
type Overrides interface {
	// Pod returns the pod as the cluster should run it, before translation,
	// and the names of the policies applied; it does not change host.
	Pod(ctx context.Context, host *corev1.Pod, cluster string) (*corev1.Pod, []string, error)
	// Object returns a ConfigMap, Secret, ServiceAccount or Service that
	// follows pods as the cluster should get it; it does not change obj.
	Object(obj runtime.Object, kind string, cluster string) (runtime.Object, error)
}

// overridden applies the override policies to a host object about to be
// mirrored into the member.
func overridden[T runtime.Object](p *Provider, obj T, kind string) (T, error) {
	if p.cfg.Overrides == nil {
		return obj, nil
	}
	out, err := p.cfg.Overrides.Object(obj, kind, p.cfg.NodeName)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("override %s for cluster %s: %w", kind, p.cfg.NodeName, err)
	}
	return out.(T), nil
}

// Provider forwards the pods of one virtual node into its member cluster.
type Provider struct {
	cfg        Config
	hostPods   corev1listers.PodLister
	memberPods corev1listers.PodLister

	// statusQueue holds host pod keys whose member pod changed.
	statusQueue workqueue.TypedRateLimitingInterface[string]
	// retryQueue holds host pod keys whose forwarding failed for a reason
	// that may pass (member unreachable, namespace not ready yet).
	retryQueue workqueue.TypedRateLimitingInterface[string]

	notifyOnce sync.Once
	notifyCh   chan struct{}
	notify     func(*corev1.Pod)

	// seen maps the key of a host pod whose member pod this process has
	// observed to the host pod's UID, so that a member pod disappearing can
	// be told apart from one that was not created yet. It is keyed by name,
	// not UID, so that an entry goes as soon as its host pod is found gone:
	// a gone host pod's UID is no longer known.
	seen sync.Map
	// ns owns the member namespaces forwarded pods land in.
	ns *namespaceMirror
	// svc mirrors the Services that select forwarded pods.
	svc *serviceMirror
	// deps mirrors the Secrets, ConfigMaps and ServiceAccounts pods use.
	deps *dependencies
	// events mirrors member pod events onto host pods, when configured.
	events *eventMirror
	// unforwarded holds the keys of the host pods last seen to run without
	// a member pod (see Backlog).
	unforwarded sync.Map
}

// New returns a provider whose Run must be called, and the member informers
// started, before it is useful.
func New(cfg Config) (*Provider, error) {
	if cfg.NodeName == "" || cfg.Installation == "" || cfg.HostPods == nil || cfg.HostClient == nil || cfg.Recorder == nil ||
		cfg.MemberClient == nil || cfg.MemberInformers == nil {
		return nil, errors.New("provider: NodeName, Installation, HostPods, HostClient, Recorder, MemberClient and MemberInformers are required")
	}
	if cfg.Namespace == nil {
		cfg.Namespace = SameName
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.StatusWorkers <= 0 {
		cfg.StatusWorkers = 8
	}
	p := &Provider{
		cfg:        cfg,
		hostPods:   cfg.HostPods.Lister(),
		memberPods: cfg.MemberInformers.Core().V1().Pods().Lister(),
		statusQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "status"}),
		retryQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "forward-retry"}),
		notifyCh: make(chan struct{}),
	}
	_, err := cfg.MemberInformers.Core().V1().Pods().Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: p.ours,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { p.memberPodChanged(obj); p.memberPodCameOrWent(obj) },
			UpdateFunc: func(_, cur any) { p.memberPodChanged(cur) },
			DeleteFunc: func(obj any) { p.memberPodChanged(obj); p.memberPodCameOrWent(obj) },
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch member pods: %w", err)
	}
	if _, err := cfg.HostPods.Informer().AddEventHandler(p.trackBacklog()); err != nil {
		return nil, fmt.Errorf("watch host pods: %w", err)
	}
	if cfg.Events != nil {
		if p.events, err = newEventMirror(p, cfg.Events); err != nil {
			return nil, fmt.Errorf("watch member events: %w", err)
		}
	}
	if p.ns, err = newNamespaceMirror(p); err != nil {
		return nil, fmt.Errorf("watch namespaces: %w", err)
	}
	if p.svc, err = newServiceMirror(p); err != nil {
		return nil, fmt.Errorf("watch services: %w", err)
	}
	if p.deps, err = newDependencies(p); err != nil {
		return nil, err
	}
	return p, nil
}

// MemberPods lists the member's pods from the provider's cache.
func (p *Provider) MemberPods() corev1listers.PodLister { return p.memberPods }

func (p *Provider) target(hostNamespace string) Target {
	return Target{Cluster: p.cfg.NodeName, Namespace: p.cfg.Namespace(hostNamespace), Installation: p.cfg.Installation}
}

// ours reports whether a member object was created by this virtual node of
// this installation. Nothing else is ever updated or deleted.
func (p *Provider) ours(obj any) bool {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return false
	}
	l := m.GetLabels()
	return l[wellknown.ClusterLabel] == p.cfg.NodeName && l[wellknown.InstallationLabel] == p.cfg.Installation
}

// ownSelector selects the member objects ours accepts.
func (p *Provider) ownSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{wellknown.ClusterLabel: p.cfg.NodeName, wellknown.InstallationLabel: p.cfg.Installation})
}

func (p *Provider) memberPodChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ns, name := m.Annotations[wellknown.HostNamespaceAnnotation], m.Annotations[wellknown.HostNameAnnotation]
	if ns == "" || name == "" {
		return
	}
	p.cfg.Metrics.memberPodChanged(ns + "/" + name)
	p.statusQueue.Add(ns + "/" + name)
}

// memberPodCameOrWent lets the Services of the pod's host namespace follow
// the pods: a member Service exists while matching pods run there.
func (p *Provider) memberPodCameOrWent(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, ok := obj.(*corev1.Pod); ok && p.svc != nil {
		p.svc.podChanged(m.Annotations[wellknown.HostNamespaceAnnotation])
	}
}

// NotifyPods registers virtual-kubelet's status callback.
func (p *Provider) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	p.notifyOnce.Do(func() {
		p.notify = cb
		close(p.notifyCh)
	})
}

// Run processes status and retry work until ctx ends. hostSynced must close
// only once the host pod cache is complete (virtual-kubelet's
// PodController().Ready()): before that, every member pod would look
// orphaned.
func (p *Provider) Run(ctx context.Context, hostSynced <-chan struct{}) {
	defer p.statusQueue.ShutDown()
	defer p.retryQueue.ShutDown()
	for _, ch := range []<-chan struct{}{p.notifyCh, hostSynced} {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
	var wg sync.WaitGroup
	for range p.cfg.StatusWorkers {
		wg.Go(func() { runQueue(ctx, p.statusQueue, p.syncStatus) })
	}
	wg.Go(func() { runQueue(ctx, p.retryQueue, p.retryForward) })
	wg.Go(func() { p.deps.run(ctx) })
	wg.Go(func() { p.ns.run(ctx) })
	wg.Go(func() { p.svc.run(ctx) })
	if p.events != nil {
		wg.Go(func() { p.events.run(ctx) })
	}
	<-ctx.Done()
	p.statusQueue.ShutDown()
	p.retryQueue.ShutDown()
	wg.Wait()
}

// newKeyQueue returns a named queue of object keys whose failures back off per key.
func newKeyQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}

// runSynced works q with sync until ctx ends, starting only once every
// cache is complete: before that, an object could look deleted on one side
// and its mirror on the other would be deleted.
func runSynced(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], synced []cache.InformerSynced, sync func(context.Context, string) error) {
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	runQueue(ctx, q, sync)
}

func runQueue(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		if err := sync(ctx, key); err != nil {
			log.G(ctx).WithError(err).WithField("pod", key).Warn("sync failed, will retry")
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// syncStatus brings the host pod in line with its member pod. It is level
// based: it looks at both pods as they are now, whatever event brought it here.
func (p *Provider) syncStatus(ctx context.Context, key string) (err error) {
	ctx, span := p.startSpan(ctx, "provider.syncStatus", key)
	defer func() {
		span.SetStatus(err)
		span.End()
		p.cfg.Metrics.operation(p.cfg.NodeName, "status", err)
	}()
	return p.syncStatusOf(ctx, key)
}

func (p *Provider) syncStatusOf(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	t := p.target(ns)
	member, err := p.memberPods.Pods(t.Namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !p.ours(member)) {
		member = nil
	} else if err != nil {
		return err
	}
	host, err := p.hostPods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && host.Spec.NodeName != p.cfg.NodeName) {
		host = nil
	} else if err != nil {
		return err
	}
	if member != nil && (host == nil || member.Labels[wellknown.HostUIDLabel] != string(host.UID)) {
		// The member pod's host pod is gone: deleted or evicted while the
		// member was unreachable, or while this process was down.
		if err := p.deleteOrphan(ctx, member); err != nil {
			return err
		}
		member = nil
	}
	if host == nil {
		p.seen.Delete(key)
		p.cfg.Metrics.statusUnchanged(key)
		return nil
	}
	switch {
	case member != nil:
		p.seen.Store(key, host.UID)
		if podstate.Terminal(host) {
			p.cfg.Metrics.statusUnchanged(key)
			return nil
		}
		status := HostStatus(host, member)
		if !StatusMatters(host.Status, status) {
			p.cfg.Metrics.statusUnchanged(key)
			return nil
		}
		p.notify(statusUpdate(host, status))
	case host.DeletionTimestamp != nil:
		// The member pod is gone: like a kubelet whose containers have
		// stopped, finish the deletion in the host right away.
		p.seen.Delete(key)
		p.cfg.Metrics.statusUnchanged(key)
		return p.deleteHostPod(ctx, host)
	case podstate.Terminal(host):
		p.seen.Delete(key)
		p.cfg.Metrics.statusUnchanged(key)
	default:
		if uid, ok := p.seen.LoadAndDelete(key); !ok || uid != host.UID {
			p.cfg.Metrics.statusUnchanged(key)
			return nil // not created yet, or created before this process started
		}
		log.G(ctx).WithField("pod", key).Warn("member pod deleted out of band")
		p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, EventMemberPodDeleted,
			"Pod %s/%s was deleted from member cluster %s outside of flotilla", t.Namespace, name, p.cfg.NodeName)
		p.notify(statusUpdate(host, DeletedStatus(host, p.cfg.NodeName, metav1.NewTime(p.cfg.Clock.Now()))))
	}
	return nil
}

// statusUpdate is what virtual-kubelet is handed to write status onto the
// host pod: its metadata and the new status, without the spec. The
// apiserver takes a pod's spec from the stored object on a status update,
// and virtual-kubelet keeps the last update of every pod until the pod is
// gone and compares each new one with it in full, so a spec here would cost
// memory per pod and CPU per status change for nothing.
func statusUpdate(host *corev1.Pod, status corev1.PodStatus) *corev1.Pod {
	return &corev1.Pod{TypeMeta: host.TypeMeta, ObjectMeta: *host.ObjectMeta.DeepCopy(), Status: status}
}

// deleteOrphan deletes a member pod whose host pod no longer exists. The UID
// precondition makes it exactly-once and keeps it off any newer pod of the
// same name.
func (p *Provider) deleteOrphan(ctx context.Context, m *corev1.Pod) error {
	if m.DeletionTimestamp != nil {
		return nil
	}
	err := p.cfg.MemberClient.CoreV1().Pods(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{
		Preconditions: metav1.NewUIDPreconditions(string(m.UID)),
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete orphaned pod %s/%s in cluster %s: %w", m.Namespace, m.Name, p.cfg.NodeName, err)
	}
	log.G(ctx).WithField("pod", m.Namespace+"/"+m.Name).Info("deleted member pod whose host pod is gone")
	return nil
}

func (p *Provider) deleteHostPod(ctx context.Context, host *corev1.Pod) error {
	err := p.cfg.HostClient.CoreV1().Pods(host.Namespace).Delete(ctx, host.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(host.UID)),
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finish deletion of host pod %s/%s: %w", host.Namespace, host.Name, err)
	}
	return nil
}

// CreatePod forwards a host pod into the member. Failures that may pass
// (the member is unreachable, the namespace's service account is not there
// yet) are retried in the background so that a pod with restartPolicy Never
// is not failed for them; other failures are returned, and virtual-kubelet
// records them on the host pod.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) (err error) {
	key := pod.Namespace + "/" + pod.Name
	ctx, span := p.startSpan(ctx, "provider.CreatePod", key)
	defer span.End()
	held, err := p.forward(ctx, pod)
	if err == nil || !transient(err) {
		span.SetStatus(err)
		p.cfg.Metrics.created(p.cfg.NodeName, held, err)
		return err
	}
	span.SetStatus(err)
	p.cfg.Metrics.retrying(p.cfg.NodeName)
	log.G(ctx).WithError(err).Info("forwarding failed, will retry")
	p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, EventForwardRetrying,
		"Forwarding to member cluster %s failed, retrying: %v", p.cfg.NodeName, err)
	p.retryQueue.AddRateLimited(key)
	return nil
}

func (p *Provider) retryForward(ctx context.Context, key string) (err error) {
	ctx, span := p.startSpan(ctx, "provider.retryForward", key)
	defer func() {
		span.SetStatus(err)
		span.End()
	}()
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	host, err := p.hostPods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if host.DeletionTimestamp != nil || podstate.Terminal(host) || host.Spec.NodeName != p.cfg.NodeName {
		return nil
	}
	held, err := p.forward(ctx, host.DeepCopy())
	p.cfg.Metrics.created(p.cfg.NodeName, held, err)
	if err != nil && !transient(err) {
		p.forwardFailed(ctx, host, err)
		return nil
	}
	return err
}

// forwardFailed fails a host pod that retrying cannot forward, with the
// reason in its status, as a kubelet does with a pod it rejects: left
// Pending, it would wait for good with only an event to tell why.
func (p *Provider) forwardFailed(ctx context.Context, host *corev1.Pod, err error) {
	log.G(ctx).WithError(err).Warn("forwarding failed for good")
	p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, EventForwardFailed,
		"Forwarding to member cluster %s failed: %v", p.cfg.NodeName, err)
	p.notify(statusUpdate(host, ForwardFailedStatus(host, p.cfg.NodeName, err)))
}

// forward creates the member pod of a host pod, or reports it held: not
// forwarded because an object it needs is missing in the host, which is
// reported on the pod, and forwarded again once the object exists.
func (p *Provider) forward(ctx context.Context, pod *corev1.Pod) (held bool, err error) {
	t := p.target(pod.Namespace)
	if err := p.ns.ensure(ctx, t.Namespace, pod.Namespace); err != nil {
		return false, err
	}
	if ready, err := p.deps.ensure(ctx, pod, t); err != nil || !ready {
		return err == nil, err
	}
	src, applied, err := p.override(ctx, pod)
	if err != nil {
		return false, err
	}
	member := ToMember(src, t)
	if err := Confine(member, p.cfg.Partition); err != nil {
		return false, fmt.Errorf("pod %s/%s on virtual cluster %s: %w", pod.Namespace, pod.Name, t.Cluster, err)
	}
	_, err = p.cfg.MemberClient.CoreV1().Pods(t.Namespace).Create(ctx, member, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		if err := p.adopt(ctx, pod, t); err != nil {
			return false, err
		}
	case err != nil:
		return false, fmt.Errorf("create pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
	}
	p.cfg.Metrics.memberPodCreated(p.cfg.NodeName, pod)
	return false, p.recordOverrides(ctx, pod, applied)
}

// override applies the override policies to a copy of the host pod.
func (p *Provider) override(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, []string, error) {
	if p.cfg.Overrides == nil {
		return pod, nil, nil
	}
	out, applied, err := p.cfg.Overrides.Pod(ctx, pod, p.cfg.NodeName)
	if err != nil {
		if !errors.Is(err, errRetry) {
			p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, EventOverrideFailed,
				"Override policies for cluster %s cannot be applied: %v", p.cfg.NodeName, err)
		}
		return nil, nil, fmt.Errorf("override pod %s/%s for cluster %s: %w", pod.Namespace, pod.Name, p.cfg.NodeName, err)
	}
	return out, applied, nil
}

// recordOverrides writes the names of the override policies applied to a
// forwarded pod on the host pod (AppliedOverridesAnnotation), when they
// changed.
func (p *Provider) recordOverrides(ctx context.Context, pod *corev1.Pod, applied []string) error {
	want := strings.Join(applied, ",")
	if pod.Annotations[AppliedOverridesAnnotation] == want {
		return nil
	}
	value := "null"
	if want != "" {
		b, _ := json.Marshal(want)
		value = string(b)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, AppliedOverridesAnnotation, value)
	_, err := p.cfg.HostClient.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record override policies on pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// errRetry marks errors that resolve themselves with time.
var errRetry = errors.New("retry")

// adopt takes over a member pod that already exists under the pod's name: it
// is this host pod's after a restart, an earlier host pod's leftover that has
// to go first, or not flotilla's at all, which is reported and left alone.
func (p *Provider) adopt(ctx context.Context, pod *corev1.Pod, t Target) error {
	existing, err := p.cfg.MemberClient.CoreV1().Pods(t.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("member pod %s/%s vanished during adoption: %w", t.Namespace, pod.Name, errRetry)
	}
	if err != nil {
		return fmt.Errorf("get pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
	}
	switch {
	case !p.ours(existing):
		return fmt.Errorf("pod %s/%s already exists in cluster %s and is not managed by this flotilla virtual node", t.Namespace, pod.Name, t.Cluster)
	case existing.Labels[wellknown.HostUIDLabel] == string(pod.UID):
		return nil
	}
	if existing.DeletionTimestamp == nil {
		err := p.cfg.MemberClient.CoreV1().Pods(t.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			Preconditions: metav1.NewUIDPreconditions(string(existing.UID)),
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete leftover pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
		}
	}
	return fmt.Errorf("waiting for leftover pod %s/%s of an earlier host pod to terminate: %w", t.Namespace, pod.Name, errRetry)
}

// transient reports whether err may go away by itself. It judges by the
// errors' types and status causes, never by their wording, with one
// exception: the member's ServiceAccount admission refuses a pod whose
// service account is not made yet with a Forbidden that carries no cause.
func transient(err error) bool {
	if errors.Is(err, errRetry) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		var netErr net.Error
		return errors.As(err, &netErr) || connectionLost(err)
	}
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err),
		namespaceTerminating(err):
		return true
	case apierrors.IsForbidden(err):
		// Admission in a namespace that was just created: its service account
		// is made by the member's controller-manager a moment later.
		return strings.Contains(status.Status().Message, "error looking up service account")
	}
	return false
}

// namespaceTerminating reports whether the apiserver refused to create an
// object in a namespace being deleted.
func namespaceTerminating(err error) bool {
	return apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// connectionLost reports whether err is a connection to the apiserver that
// could not be made or broke off.
func connectionLost(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// UpdatePod applies to the member pod what may change on a running pod:
// container images, activeDeadlineSeconds, added tolerations, labels and annotations.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) (err error) {
	ctx, span := p.startSpan(ctx, "provider.UpdatePod", pod.Namespace+"/"+pod.Name)
	defer func() {
		span.SetStatus(err)
		span.End()
		p.cfg.Metrics.operation(p.cfg.NodeName, "update", err)
	}()
	t := p.target(pod.Namespace)
	src, applied, err := p.override(ctx, pod)
	if err != nil {
		return err
	}
	want := ToMember(src, t)
	pods := p.cfg.MemberClient.CoreV1().Pods(t.Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return errdefs.NotFoundf("pod %s/%s not found in cluster %s", t.Namespace, pod.Name, t.Cluster)
		}
		if err != nil {
			return err
		}
		if !p.ours(cur) || cur.Labels[wellknown.HostUIDLabel] != string(pod.UID) {
			return errdefs.NotFoundf("pod %s/%s in cluster %s belongs to another host pod", t.Namespace, pod.Name, t.Cluster)
		}
		upd := cur.DeepCopy()
		if !applyMutable(upd, want) {
			return nil
		}
		_, err = pods.Update(ctx, upd, metav1.UpdateOptions{})
		if err == nil {
			p.svc.podChanged(pod.Namespace) // labels may now match other Services
		}
		return err
	})
	if err != nil {
		return err
	}
	return p.recordOverrides(ctx, pod, applied)
}

// applyMutable copies the updatable fields of want into cur and reports
// whether anything changed.
func applyMutable(cur, want *corev1.Pod) bool {
	before := cur.DeepCopy()
	cur.Labels = want.Labels
	cur.Annotations = want.Annotations
	copyImages(cur.Spec.Containers, want.Spec.Containers)
	copyImages(cur.Spec.InitContainers, want.Spec.InitContainers)
	cur.Spec.ActiveDeadlineSeconds = want.Spec.ActiveDeadlineSeconds
	for _, t := range want.Spec.Tolerations {
		if !hasToleration(cur.Spec.Tolerations, t) {
			cur.Spec.Tolerations = append(cur.Spec.Tolerations, t)
		}
	}
	return !equality.Semantic.DeepEqual(before, cur)
}

func hasToleration(ts []corev1.Toleration, t corev1.Toleration) bool {
	for _, x := range ts {
		if equality.Semantic.DeepEqual(x, t) {
			return true
		}
	}
	return false
}

// DeletePod deletes the member pod with the host pod's grace period. It may
// be called many times — virtual-kubelet calls it again when the grace
// period shortens, as it does when the host pod's deletion is finished — so
// it works from the member pod cache and writes only what is still to do:
// nothing while the member pod terminates with no longer a grace period than
// asked for; the host pod's deletion is finished once the member pod is gone.
// A member pod the cache has not shown yet is left to the orphan check,
// which deletes it as soon as it appears without its host pod. It reports
// success rather than NotFound for a pod already gone, because
// virtual-kubelet records every error, NotFound included, as a
// ProviderDeleteFailed warning on the host pod.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) (err error) {
	ctx, span := p.startSpan(ctx, "provider.DeletePod", pod.Namespace+"/"+pod.Name)
	defer func() {
		span.SetStatus(err)
		span.End()
		p.cfg.Metrics.operation(p.cfg.NodeName, "delete", err)
	}()
	t := p.target(pod.Namespace)
	member, err := p.memberPods.Pods(t.Namespace).Get(pod.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err == nil && p.ours(member) && member.Labels[wellknown.HostUIDLabel] == string(pod.UID) {
		if member.DeletionTimestamp != nil && !shorterGrace(pod.DeletionGracePeriodSeconds, member.DeletionGracePeriodSeconds) {
			return nil // terminating; syncStatus finishes the host pod once it is gone
		}
		err := p.cfg.MemberClient.CoreV1().Pods(t.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Preconditions:      metav1.NewUIDPreconditions(string(member.UID)),
		})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
		}
	}
	// The member pod is gone. Finish the host pod's deletion as a kubelet
	// does, unless it is already being removed at once.
	if pod.DeletionTimestamp != nil && ptr.Deref(pod.DeletionGracePeriodSeconds, 1) != 0 {
		return p.deleteHostPod(ctx, pod)
	}
	return nil
}

// PodEventFilter is virtual-kubelet's PodEventFilterFunc. It hides a host
// pod whose deletion is already being finished (grace period 0) and whose
// member pod is gone, since virtual-kubelet has nothing left to do for it:
// the informer's filtering handler turns the update that shortened the
// grace period into a delete, so virtual-kubelet forgets the pod at once
// instead of comparing it in full with its last spec (a millisecond of CPU
// per pod) and calling DeletePod again.
func (p *Provider) PodEventFilter(_ context.Context, pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil || ptr.Deref(pod.DeletionGracePeriodSeconds, 1) != 0 {
		return true
	}
	member, err := p.memberPods.Pods(p.target(pod.Namespace).Namespace).Get(pod.Name)
	return err == nil && p.ours(member) && member.Labels[wellknown.HostUIDLabel] == string(pod.UID)
}

// shorterGrace reports whether grace period a is shorter than b; nil is the
// pod's default, never shorter.
func shorterGrace(a, b *int64) bool {
	return a != nil && (b == nil || *a < *b)
}

// GetPod returns the member pod in host terms (see HostView), or a NotFound
// error when this host pod has no member pod.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	t := p.target(namespace)
	member, err := p.memberPods.Pods(t.Namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !p.ours(member)) {
		return nil, errdefs.NotFoundf("pod %s/%s not found in cluster %s", t.Namespace, name, t.Cluster)
	}
	if err != nil {
		return nil, err
	}
	host, err := p.hostPods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return orphanView(member), nil
	}
	if err != nil {
		return nil, err
	}
	if member.Labels[wellknown.HostUIDLabel] != string(host.UID) {
		return nil, errdefs.NotFoundf("pod %s/%s in cluster %s belongs to another host pod", t.Namespace, name, t.Cluster)
	}
	return HostView(host, member, t), nil
}

// orphanView names a member pod whose host pod is gone by its host
// coordinates, so virtual-kubelet can ask for its deletion.
func orphanView(m *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      m.Annotations[wellknown.HostNameAnnotation],
			Namespace: m.Annotations[wellknown.HostNamespaceAnnotation],
			UID:       types.UID(m.Labels[wellknown.HostUIDLabel]),
		},
		Status: *m.Status.DeepCopy(),
	}
}

// GetPodStatus returns the status GetPod would.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every member pod this virtual node forwarded, in host terms.
func (p *Provider) GetPods(_ context.Context) ([]*corev1.Pod, error) {
	members, err := p.memberPods.List(p.ownSelector())
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(members))
	for _, m := range members {
		ns, name := m.Annotations[wellknown.HostNamespaceAnnotation], m.Annotations[wellknown.HostNameAnnotation]
		host, err := p.hostPods.Pods(ns).Get(name)
		if err != nil || string(host.UID) != m.Labels[wellknown.HostUIDLabel] {
			out = append(out, orphanView(m))
			continue
		}
		out = append(out, HostView(host, m, p.target(ns)))
	}
	return out, nil
}

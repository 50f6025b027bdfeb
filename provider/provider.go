// This file holds the Provider, its configuration, and how it starts
// and runs.

package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podfields"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/keyqueue"
	"flotilla.io/flotilla/provider/mirror"
	"flotilla.io/flotilla/provider/translate"
)

var (
	_ node.PodLifecycleHandler = (*Provider)(nil)
	_ node.PodNotifier         = (*Provider)(nil)
)

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
	HostClient kube.Interface
	// Recorder records events on host objects.
	Recorder     record.EventRecorder
	MemberClient kube.Interface
	// MemberConfig is used for streaming calls (exec, attach).
	MemberConfig *rest.Config
	// MemberInformers is the member's shared informer factory; the provider
	// registers its pod informer and never starts the factory itself.
	MemberInformers *kube.Factory
	Namespace       NamespaceMapper
	// Partition, for a virtual cluster that is a label partition of its
	// member, selects the member nodes its pods may run on (see Confine).
	Partition *metav1.LabelSelector
	Clock     clock.Clock
	// StatusWorkers is how many goroutines push status to the host.
	StatusWorkers int
	// MirrorEvents mirrors the events of member pods onto their host pods,
	// under the member component's name, with HostClient.
	MirrorEvents bool
	// HostInformers is the host's shared informer factory, of what the
	// virtual nodes share (namespaces, Services, claims, volumes); the
	// provider never starts it itself. The Secrets, ConfigMaps and
	// ServiceAccounts pods use are read one object at a time through
	// HostClient instead (dependency_watch.go).
	HostInformers *kube.Factory
	// Overrides, when set, applies the override policies that target this
	// virtual node to each pod before it is translated and forwarded.
	Overrides Overrides
	// Metrics, when set, measures forwarding (see HostPodEvents and PodClient).
	Metrics *Metrics
	// StorageClasses maps a host storage class to the member class its
	// claims get there; a class not listed keeps its name (mirror/claim.go).
	StorageClasses map[string]string
	// HandBackAfter is how long a forwarded pod may stay unschedulable in
	// the member before it is handed back (hand_back.go); 0 never.
	HandBackAfter time.Duration
	// Fields, when set, is what the member's API knows of pods, shared by
	// the member's virtual nodes: a pod that sets a field the member does
	// not know or drops is not forwarded, and a field found lost when a
	// pod is created there is added to it (field_loss.go).
	Fields *podfields.Member
	// HostOnlyFields are the pod fields the host's API serves and
	// flotilla's types do not know: a pod that sets one is refused rather
	// than forwarded without it. flotilla links the newest Kubernetes
	// release, so this holds only fields a later release removed (a 1.35
	// host's alpha spec.workloadRef) or a host upgraded past flotilla-node.
	HostOnlyFields []string
	// HostLacks are the pod status fields flotilla's types know and the
	// host's API does not serve (a host older than its member), and
	// HostVersion the host's Kubernetes version: the host drops those
	// fields when a status is written, so a member pod that sets one is
	// told of on its host pod.
	HostLacks   []string
	HostVersion string
	// MemberReachable, when set, tells whether the member answers its
	// health checks. While it does not, the member pod cache can only be
	// stale: the host pods are not Ready (status_unreachable.go), so that
	// no Service in the host or across the fleet keeps their endpoints,
	// until the member answers again. Call MemberReachabilityChanged when
	// it changes.
	MemberReachable func() bool
	// MultiCluster, when set, imports the fleet's exported Services into
	// the member and, on one virtual node of the member, relays the
	// member's own exports to the host (mirror.MultiCluster).
	MultiCluster *mirror.MultiCluster
}

// env is what the pod lifecycle and the dependency mirror share: the
// configuration, the virtual node's identity and the caches of pods. The
// dependency mirror holds an env, never the Provider: what it asks of
// forwarding goes through lifecycle, so that a pod is forwarded from one
// place. The other mirrors (package mirror) ask nothing of forwarding.
type env struct {
	cfg        Config
	hostPods   corev1listers.PodLister
	memberPods memberpod.Lister
}

// lifecycle is what the dependency mirror asks of pod forwarding.
type lifecycle interface {
	// retry forwards the host pod of key again: what it waited for came.
	retry(key string)
	// publish writes a new status onto a host pod (a pod held for a
	// missing object says so in its status).
	publish(host *corev1.Pod, status corev1.PodStatus)
}

var _ lifecycle = (*Provider)(nil)

// Provider forwards the pods of one virtual node into its member cluster.
type Provider struct {
	*env

	// statusQueue holds host pod keys whose member pod changed.
	statusQueue workqueue.TypedRateLimitingInterface[string]
	// retryQueue holds host pod keys whose forwarding failed for a reason
	// that may pass (member unreachable, namespace not ready yet).
	retryQueue workqueue.TypedRateLimitingInterface[string]
	// ephemeralQueue holds host pod keys whose ephemeral containers could
	// not be added to the member pod for a reason that may pass.
	ephemeralQueue workqueue.TypedRateLimitingInterface[string]

	// hostStatus writes host pod statuses.
	hostStatus *hostStatus

	// seen maps the key of a host pod whose member pod this process has
	// observed to the host pod's UID, so that a member pod disappearing can
	// be told apart from one that was not created yet. It is keyed by name,
	// not UID, so that an entry goes as soon as its host pod is found gone:
	// a gone host pod's UID is no longer known.
	seen sync.Map
	// mirrors make namespaces, Services, claims and events follow the pods.
	mirrors *mirror.Mirrors
	// deps mirrors the Secrets, ConfigMaps and ServiceAccounts pods use.
	deps *dependencies
	// unforwarded holds the keys of the host pods last seen to run without
	// a member pod (see Backlog).
	unforwarded sync.Map
	// handed holds the hand-backs under way (handBack by key); told, the
	// member's last answer reported on a bare pod left waiting.
	handed, told sync.Map
	// deleting maps the UID of a member pod this process had the member
	// delete to the grace period it asked for, until the member pod is
	// seen gone (memberPodGone). A member under load shows a deletion late,
	// and meanwhile virtual-kubelet asks again: at the end of a host pod's
	// grace period it removes the host pod itself, and then asks the
	// provider to delete the pod it still has. Deleting a terminating pod
	// again changes nothing but costs the member a request.
	deleting sync.Map
	// gone holds, by host pod key, the member pods seen deleted and why
	// they went (rememberGone), until the status sync their deletion
	// queued takes them.
	gone sync.Map
	// refusedFields maps the key of a host pod refused for a field the
	// member cannot run (refuseFields) to its UID, until the host pod is
	// gone: its member pod, when there was one, went for that reason.
	refusedFields sync.Map
	// statusBeyond maps the key of a host pod to the status fields told of
	// on it (reportStatusBeyond), until the host pod is gone.
	statusBeyond sync.Map
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
		env: &env{
			cfg:        cfg,
			hostPods:   cfg.HostPods.Lister(),
			memberPods: memberpod.Lister{Indexer: cfg.MemberInformers.Pods().Informer().GetIndexer()},
		},
		statusQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "status"}),
		retryQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "forward-retry"}),
		ephemeralQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "ephemeral-retry"}),
	}
	p.hostStatus = newHostStatus(p.env, p.statusQueue.Add)
	if err := p.watchMemberPods(); err != nil {
		return nil, err
	}
	if err := p.watchHostPods(); err != nil {
		return nil, err
	}
	if err := p.initMirrors(); err != nil {
		return nil, err
	}
	var err error
	if p.deps, err = newDependencies(p.env, p); err != nil {
		return nil, err
	}
	return p, nil
}

// watchMemberPods follows the member pods this virtual node forwarded:
// their status goes to the host, and the Services of their namespace
// follow them.
func (p *Provider) watchMemberPods() error {
	_, err := p.cfg.MemberInformers.Pods().Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: p.ours,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { p.memberPodChanged(obj); p.memberPodCameOrWent(obj) },
			UpdateFunc: func(_, cur any) { p.memberPodChanged(cur) },
			// memberPodGone first: it keeps what the sync that
			// memberPodChanged queues reads.
			DeleteFunc: func(obj any) { p.memberPodGone(obj); p.memberPodChanged(obj); p.memberPodCameOrWent(obj) },
		},
	})
	if err != nil {
		return fmt.Errorf("watch member pods: %w", err)
	}
	return nil
}

// watchHostPods keeps the backlog and the status writer's view of the
// host pods current.
func (p *Provider) watchHostPods() error {
	if _, err := p.cfg.HostPods.Informer().AddEventHandler(p.trackBacklog()); err != nil {
		return fmt.Errorf("watch host pods: %w", err)
	}
	if _, err := p.cfg.HostPods.Informer().AddEventHandler(p.hostStatus.cacheEvents()); err != nil {
		return fmt.Errorf("watch host pods: %w", err)
	}
	return nil
}

// initMirrors registers the mirrors of namespaces, Services, claims and
// events.
func (p *Provider) initMirrors() error {
	cfg := p.cfg
	m, err := mirror.New(mirror.Config{
		NodeName: cfg.NodeName, Installation: cfg.Installation, Namespace: cfg.Namespace,
		HostClient: cfg.HostClient, MemberClient: cfg.MemberClient,
		HostInformers: cfg.HostInformers, MemberInformers: cfg.MemberInformers,
		HostPods: p.hostPods, MemberPods: p.memberPods, Recorder: cfg.Recorder, Clock: cfg.Clock,
		Overrides: objectOverrides(cfg.Overrides), StorageClasses: cfg.StorageClasses, Events: cfg.MirrorEvents,
		MultiCluster: cfg.MultiCluster,
	})
	if err != nil {
		return err
	}
	p.mirrors = m
	return nil
}

// MemberPods lists the member's pods from the provider's cache.
func (p *Provider) MemberPods() memberpod.Lister { return p.memberPods }

func (e *env) target(hostNamespace string) translate.Target {
	return translate.Target{Cluster: e.cfg.NodeName, Namespace: e.cfg.Namespace(hostNamespace), Installation: e.cfg.Installation}
}

// ours reports whether a member object was created by this virtual node of
// this installation. Nothing else is ever updated or deleted.
func (e *env) ours(obj any) bool {
	m, ok := podcache.LastState(obj).(metav1.Object)
	if !ok {
		return false
	}
	return e.owner().Owns(m)
}

// owner is the identity this virtual node's member objects carry.
func (e *env) owner() wellknown.Owner {
	return wellknown.Owner{Cluster: e.cfg.NodeName, Installation: e.cfg.Installation}
}

// ownSelector selects the member objects ours accepts.
func (e *env) ownSelector() labels.Selector {
	return e.owner().Selector()
}

// retry implements lifecycle.
func (p *Provider) retry(key string) { p.retryQueue.Add(key) }

// publish implements lifecycle.
func (p *Provider) publish(host *corev1.Pod, status corev1.PodStatus) {
	p.hostStatus.set(host, status)
}

// memberPodCameOrWent lets the Services of the pod's host namespace follow
// the pods: a member Service exists while matching pods run there.
func (p *Provider) memberPodCameOrWent(obj any) {
	if m, ok := memberpod.Of(obj); ok && p.mirrors != nil {
		p.mirrors.Services.PodChanged(m.Annotations[wellknown.HostNamespaceAnnotation])
	}
}

// memberPodGone forgets the deletion flotilla asked of a member pod, and
// keeps that the pod went, and why, for the status sync.
func (p *Provider) memberPodGone(obj any) {
	if m, ok := memberpod.Of(obj); ok {
		p.deleting.Delete(m.UID)
		p.rememberGone(m)
	}
}

// askedToDelete records that this process had the member delete m with
// grace. The member's watch may show the deletion before the member's
// answer comes (a pod removed at once), and memberPodGone then found no
// record to forget: kept, it would outlive the pod. An informer removes a
// pod from its cache before it calls handlers with the deletion, so a
// pod still in the cache has its memberPodGone still to come, and one
// gone from it has had it or is about to.
func (p *Provider) askedToDelete(m *memberpod.Pod, grace *int64) {
	p.deleting.Store(m.UID, grace)
	if cur, err := p.memberPods.Get(m.Namespace, m.Name); err != nil || cur.UID != m.UID {
		p.deleting.Delete(m.UID)
	}
}

// deleteAsked reports whether this process had the member delete m with
// a grace period no longer than grace already, which the cache does not
// show yet.
func (p *Provider) deleteAsked(m *memberpod.Pod, grace *int64) bool {
	asked, ok := p.deleting.Load(m.UID)
	return ok && !shorterGrace(grace, asked.(*int64))
}

// NotifyPods makes virtual-kubelet leave pod status to the provider: a
// provider that implements it is never polled for status, and this one
// writes status itself (hostStatus) rather than through the callback.
func (p *Provider) NotifyPods(context.Context, func(*corev1.Pod)) {}

// Run processes status and retry work until ctx ends. hostSynced must close
// only once the host pod cache is complete (virtual-kubelet's
// PodController().Ready()): before that, every member pod would look
// orphaned.
func (p *Provider) Run(ctx context.Context, hostSynced <-chan struct{}) {
	defer p.statusQueue.ShutDown()
	defer p.retryQueue.ShutDown()
	defer p.ephemeralQueue.ShutDown()
	select {
	case <-ctx.Done():
		return
	case <-hostSynced:
	}
	var wg sync.WaitGroup
	wg.Go(func() { keyqueue.Run(ctx, p.statusQueue, p.cfg.StatusWorkers, p.syncStatus) })
	wg.Go(func() { p.hostStatus.run(ctx, p.cfg.StatusWorkers) })
	wg.Go(func() { p.resyncStatuses(ctx) })
	wg.Go(func() { keyqueue.Run(ctx, p.retryQueue, 1, p.retryForward) })
	wg.Go(func() { keyqueue.Run(ctx, p.ephemeralQueue, 1, p.retryEphemeral) })
	wg.Go(func() { p.deps.run(ctx) })
	wg.Go(func() { p.mirrors.Run(ctx) })
	<-ctx.Done()
	p.statusQueue.ShutDown()
	p.retryQueue.ShutDown()
	p.ephemeralQueue.ShutDown()
	wg.Wait()
}

// objectOverrides is o as the mirrors take it: none when o is nil.
func objectOverrides(o Overrides) mirror.ObjectOverrides {
	if o == nil {
		return nil
	}
	return o
}

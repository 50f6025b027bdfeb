// Package agent runs one flotilla-node process: the virtual nodes of one
// member cluster — the whole member, or each of its label partitions — over
// a single set of member informers, so that the member apiserver sees the
// same watch load for fifty partitions as for one. Each virtual node has its
// own node controller and lease, pod controller and kubelet endpoint,
// assembled from virtual-kubelet's node package.
package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/clusternode"
	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/kubeletauth"
	"flotilla.io/flotilla/internal/nodeconfig"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/override/hostpolicies"
	"flotilla.io/flotilla/provider"
)

// Config holds what an agent needs; all fields but the tuning ones are required.
type Config struct {
	HostClient kube.Interface
	// HostConfig, when set, lets the agent read the host's override
	// policies and apply them to the pods it forwards.
	HostConfig   *rest.Config
	MemberClient kube.Interface
	// MemberConfig is used for streaming calls (exec, attach, port-forward).
	MemberConfig *rest.Config
	// Installation identifies the host cluster on every member object.
	Installation string
	// Member is the member cluster's name and Mode how flotilla-node
	// reaches it ("push" or "pull"), published on every virtual node.
	Member, Mode string
	// VirtualClusters are the virtual nodes to run (validated, defaulted).
	VirtualClusters []v1alpha1.VirtualCluster
	// NodeIP is where the host apiserver reaches the kubelet endpoints.
	NodeIP string
	// KubeletVersion is shown as the virtual nodes' version.
	KubeletVersion string
	// ServingCert is the kubelet endpoints' certificate.
	ServingCert tls.Certificate
	// Auth authenticates and authorizes callers of a virtual node's kubelet
	// endpoint; it is called once per virtual node.
	Auth func(nodeName string) (kubeletauth.Auth, error)
	// Kubelet returns what serves a virtual node's kubelet API (logs, exec,
	// stats, ...) for its provider; an error stops the agent.
	Kubelet func(vc v1alpha1.VirtualCluster, p *provider.Provider) (provider.KubeletAPI, error)

	// PodWorkers and StatusWorkers are the process's concurrency of
	// forwarding and of status sync, shared among the virtual nodes (see
	// workersPerNode).
	PodWorkers       int
	StatusWorkers    int
	HealthInterval   time.Duration
	FailureThreshold int
	// KubeletAPIProbeInterval, when positive, is how often each virtual
	// node's kubelet endpoint is probed through the host apiserver's node
	// proxy, the way kubectl logs and exec reach it (see
	// wellknown.NodeKubeletAPIUnreachable).
	KubeletAPIProbeInterval time.Duration
	// Health, when set, replaces the member's /readyz as the health check.
	Health clusternode.HealthChecker
	// BindAddress is where the kubelet endpoints listen (default: every
	// address of the machine).
	BindAddress string
	// SyncTimeout bounds the wait for the member's caches before the
	// virtual nodes register anyway (NotReady if the member is unreachable).
	SyncTimeout time.Duration

	// Metrics, when set, measures forwarding; Registerer, when set, gets the
	// virtual nodes' gauges (pods, readiness, backlog).
	Metrics    *provider.Metrics
	Registerer prometheus.Registerer
}

// virtualNode is one running virtual node.
type virtualNode struct {
	vc      v1alpha1.VirtualCluster
	nodes   *clusternode.Provider
	pods    *provider.Provider
	podCtl  *node.PodController
	handler http.Handler
}

// Agent runs the virtual nodes of one member. Like virtual-kubelet's
// nodeutil.Node, Run returns only once everything it started (pod and node
// controllers, workers, kubelet endpoints, informers) has stopped, so that
// nothing of it writes after Run returns: a standby that takes over the
// Lease never works beside it.
type Agent struct {
	cfg   Config
	ready chan struct{}
	done  chan struct{}
	err   error // set before done is closed
}

// New checks cfg and returns an agent to Run.
func New(cfg Config) (*Agent, error) {
	if len(cfg.VirtualClusters) == 0 || cfg.Auth == nil || cfg.Kubelet == nil {
		return nil, errors.New("agent: VirtualClusters, Auth and Kubelet are required")
	}
	return &Agent{cfg: cfg, ready: make(chan struct{}), done: make(chan struct{})}, nil
}

// Run registers and serves every virtual node until ctx ends or one of them
// fails, and returns when all it started has stopped.
func Run(ctx context.Context, cfg Config) error {
	a, err := New(cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// Ready is closed once every virtual node is registered and running.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Done is closed when Run has returned.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Err is what Run returned; only meaningful once Done is closed.
func (a *Agent) Err() error {
	<-a.done
	return a.err
}

// Run registers and serves every virtual node until ctx ends or one of them
// fails; it returns only once every controller, worker, server and informer
// it started has stopped. An agent runs once.
func (a *Agent) Run(ctx context.Context) (err error) {
	cfg := a.cfg
	ctx, stop := context.WithCancelCause(ctx)
	// Member pods this installation forwarded are cached with only what
	// flotilla reads of them; see provider.MemberPodTransform.
	var memberPodStore cache.Store // set before the informer starts
	memberInformers := kube.NewFactory(cfg.MemberClient,
		kube.WithTransform(provider.MemberPodsTransform(cfg.Installation, func() cache.Store { return memberPodStore })))
	memberPodStore = memberInformers.Pods().Informer().GetStore()
	hostInformers := kube.NewFactory(cfg.HostClient, kube.WithTransform(provider.HostObjectTransform))
	// One informer watches the host pods of every virtual node of the
	// process; each node sees its own through provider.NodePodInformer.
	var names []string
	for _, vc := range cfg.VirtualClusters {
		names = append(names, vc.Name)
	}
	var hostPodStore cache.Store // set before the informer starts
	hostPodInformers := kube.NewFactory(cfg.HostClient,
		kube.WithTransform(provider.HostPodsTransform(names, func() cache.Store { return hostPodStore })),
		kube.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = provider.HostPodSelector(names) }))
	hostPods := hostPodInformers.Pods()
	hostPodStore = hostPods.Informer().GetStore()
	factories := []*kube.Factory{memberInformers, hostInformers, hostPodInformers}
	broadcaster := record.NewBroadcaster()
	var wg sync.WaitGroup
	defer func() {
		// Everything stops on the cancelled context; Shutdown waits for
		// the informers' goroutines, wg for the rest; the events they
		// recorded on their way out are sent before the broadcaster goes.
		stop(nil)
		for _, f := range factories {
			f.Shutdown()
		}
		wg.Wait()
		broadcaster.Shutdown()
		a.err = err
		close(a.done)
	}()
	// Of the host's nodes, only the process's own are read (override
	// policies target their labels); watching all would have every
	// flotilla-node decode every other member's node updates.
	own, err := ownNodes(names)
	if err != nil {
		return err
	}
	hostNodeInformers := kube.NewFactory(cfg.HostClient, kube.WithTransform(provider.HostObjectTransform),
		kube.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = own.String() }))
	factories = append(factories, hostNodeInformers)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.HostClient.CoreV1().Events("")})

	var ovr provider.Overrides
	if cfg.HostConfig != nil {
		nodes := hostNodeInformers.Nodes().Lister()
		o, err := hostpolicies.Start(ctx, cfg.HostConfig, nodes)
		if err != nil {
			return fmt.Errorf("override policies: %w", err)
		}
		ovr = o
	}

	// One member, one health check, however many virtual nodes ask.
	var check clusternode.HealthChecker = readyz{cfg.MemberClient}
	if cfg.Health != nil {
		check = cfg.Health
	}
	health := newSharedHealth(check, cfg.HealthInterval/2, cfg.HealthInterval, clock.RealClock{})
	cfg.PodWorkers = workersPerNode(cfg.PodWorkers, len(cfg.VirtualClusters))
	cfg.StatusWorkers = workersPerNode(cfg.StatusWorkers, len(cfg.VirtualClusters))
	if err := provider.IndexHostPodsByNode(hostPods); err != nil {
		return err
	}
	// One count of what the member's pods request, however many virtual
	// nodes stand for the member.
	memberPods, err := clusternode.NewMemberPods(memberInformers)
	if err != nil {
		return err
	}
	var vns []*virtualNode
	for _, vc := range cfg.VirtualClusters {
		vn, err := newVirtualNode(cfg, vc, memberInformers, memberPods, hostInformers, provider.NodePodInformer(hostPods, vc.Name), broadcaster, ovr, health)
		if err != nil {
			return fmt.Errorf("virtual node %s: %w", vc.Name, err)
		}
		vns = append(vns, vn)
	}

	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(nodeGauges(vns)); err != nil {
			return fmt.Errorf("register node metrics: %w", err)
		}
	}

	memberInformers.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, cfg.SyncTimeout)
	synced := cache.WaitForCacheSync(syncCtx.Done(),
		memberInformers.Nodes().Informer().HasSynced,
		memberInformers.Pods().Informer().HasSynced)
	cancel()
	if !synced {
		log.G(ctx).WithField("timeout", cfg.SyncTimeout).Warn("member caches did not sync; registering the nodes from what is known")
	}
	hostInformers.Start(ctx.Done())
	hostPodInformers.Start(ctx.Done())
	hostNodeInformers.Start(ctx.Done())

	running := make([]<-chan struct{}, 0, len(vns))
	for _, vn := range vns {
		up := make(chan struct{})
		running = append(running, up)
		wg.Go(func() { vn.run(ctx, cfg, stop, &wg, up) })
	}
	wg.Go(func() {
		for _, up := range running {
			select {
			case <-ctx.Done():
				return
			case <-up:
			}
		}
		close(a.ready)
	})
	<-ctx.Done()
	stop(nil) // a no-op if a virtual node failed first: its cause stays
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func newVirtualNode(cfg Config, vc v1alpha1.VirtualCluster, member *kube.Factory, memberPods *clusternode.MemberPods, host *kube.Factory, podInformer corev1informers.PodInformer, events record.EventBroadcaster, ovr provider.Overrides, health clusternode.HealthChecker) (*virtualNode, error) {
	nodes, err := clusternode.NewProvider(clusternode.ProviderConfig{
		Node: clusternode.Config{
			Name:             vc.Name,
			Installation:     cfg.Installation,
			Member:           cfg.Member,
			Mode:             cfg.Mode,
			NamespaceMapping: string(vc.NamespaceMapping),
			Selector:         nodeconfig.Selector(vc),
			Labels:           vc.Labels,
			Taints:           vc.Taints,
			Region:           vc.Region,
			Zone:             vc.Zone,
			Provider:         vc.Provider,
			InternalIP:       cfg.NodeIP,
			KubeletPort:      vc.KubeletPort,
			KubeletVersion:   cfg.KubeletVersion,
			Grow:             growShapes(vc.Placement),
		},
		Informers:          member,
		Pods:               memberPods,
		Health:             health,
		HealthInterval:     cfg.HealthInterval,
		FailureThreshold:   cfg.FailureThreshold,
		KubeletAPI:         kubeletAPIProbe(cfg, vc.Name),
		KubeletAPIInterval: cfg.KubeletAPIProbeInterval,
	})
	if err != nil {
		return nil, err
	}
	// virtual-kubelet's pod controller treats every pod of its informer as
	// its own: podInformer shows it this node's.
	recorder := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "flotilla-node", Host: vc.Name})
	mapper := provider.SameName
	if vc.NamespaceMapping == v1alpha1.Suffix {
		mapper = provider.Suffix(vc.Name)
	}
	pods, err := provider.New(provider.Config{
		NodeName:        vc.Name,
		Installation:    cfg.Installation,
		HostPods:        podInformer,
		HostClient:      cfg.HostClient,
		Recorder:        recorder,
		MemberClient:    cfg.MemberClient,
		MemberConfig:    cfg.MemberConfig,
		MemberInformers: member,
		HostInformers:   host,
		Namespace:       mapper,
		Partition:       vc.NodeSelector,
		StatusWorkers:   cfg.StatusWorkers,
		MirrorEvents:    true,
		Overrides:       ovr,
		Metrics:         cfg.Metrics,
		HandBackAfter:   handBackAfter(vc.Placement),
		StorageClasses:  vc.StorageClasses,
	})
	if err != nil {
		return nil, err
	}
	if cfg.Metrics != nil {
		// Ahead of the pod controller's handler: the create latency counts
		// from the moment the host pod is seen.
		if _, err := podInformer.Informer().AddEventHandler(pods.HostPodEvents()); err != nil {
			return nil, err
		}
	}
	podCtl, err := node.NewPodController(node.PodControllerConfig{
		PodClient:     cfg.HostClient.CoreV1(),
		PodInformer:   provider.PodInformerForVirtualKubelet(podInformer),
		EventRecorder: quietSuccess{recorder},
		Provider:      pods,
		// The informer only holds this node's pods; the filter spares
		// virtual-kubelet the last update of a pod already gone below.
		PodEventFilterFunc: pods.PodEventFilter,
		ConfigMapInformer:  host.ConfigMaps(),
		SecretInformer:     host.Secrets(),
		ServiceInformer:    host.Services(),
		// Secrets and ConfigMaps are mirrored as objects, never inlined
		// into the forwarded pod spec.
		SkipDownwardAPIResolution: true,
		// virtual-kubelet's default limiter adds a shared 10 qps bucket to
		// each queue, which caps forwarding at ten pods a second after a
		// burst of a hundred; failures still back off per pod.
		SyncPodsFromKubernetesRateLimiter:    perItemBackoff(),
		DeletePodsFromKubernetesRateLimiter:  perItemBackoff(),
		SyncPodStatusFromProviderRateLimiter: perItemBackoff(),
	})
	if err != nil {
		return nil, err
	}
	kubelet, err := cfg.Kubelet(vc, pods)
	if err != nil {
		return nil, fmt.Errorf("kubelet endpoint of virtual node %s: %w", vc.Name, err)
	}
	mux := http.NewServeMux()
	// What the kubelet API probe asks for, through the host apiserver.
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.Handle("/", api.PodHandler(api.PodHandlerConfig{
		RunInContainer:    kubelet.RunInContainer,
		AttachToContainer: kubelet.AttachToContainer,
		GetContainerLogs:  kubelet.GetContainerLogs,
		GetPods:           kubelet.GetPods,
		GetPodsFromKubernetes: func(context.Context) ([]*corev1.Pod, error) {
			return podInformer.Lister().List(labels.Everything())
		},
		GetStatsSummary:    kubelet.GetStatsSummary,
		GetMetricsResource: kubelet.GetMetricsResource,
		PortForward:        kubelet.PortForward,
	}, true))
	auth, err := cfg.Auth(vc.Name)
	if err != nil {
		return nil, err
	}
	return &virtualNode{vc: vc, nodes: nodes, pods: pods, podCtl: podCtl,
		handler: kubeletauth.Handler(auth, mux, log.L.WithField("node", vc.Name))}, nil
}

// run starts the virtual node's pieces in virtual-kubelet's order — pods
// first, so that nothing is scheduled to a node that cannot take pods yet —
// and stops the whole agent if one of them fails.
func (vn *virtualNode) run(ctx context.Context, cfg Config, stop context.CancelCauseFunc, wg *sync.WaitGroup, up chan<- struct{}) {
	ctx = log.WithLogger(ctx, log.G(ctx).WithField("node", vn.vc.Name))
	fail := func(what string, err error) {
		if err != nil && ctx.Err() == nil {
			stop(fmt.Errorf("virtual node %s: %s: %w", vn.vc.Name, what, err))
		}
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(int(vn.vc.KubeletPort))), &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cfg.ServingCert},
		ClientAuth:   tls.RequestClientCert,
	})
	if err != nil {
		fail("kubelet endpoint", err)
		return
	}
	srv := &http.Server{Handler: vn.handler, ReadHeaderTimeout: 30 * time.Second}
	wg.Go(func() { fail("kubelet endpoint", ignoreClosed(srv.Serve(ln))) })
	wg.Go(func() {
		<-ctx.Done()
		_ = srv.Close()
	})

	wg.Go(func() { fail("pod controller", vn.podCtl.Run(ctx, cfg.PodWorkers)) })
	select {
	case <-ctx.Done():
		return
	case <-vn.podCtl.Ready():
	}
	// The node is registered only now, with the capacity of the member
	// caches that have synced, rather than empty.
	nodeCtl, err := node.NewNodeController(vn.nodes, vn.nodes.Node(), cfg.HostClient.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(cfg.HostClient.CoordinationV1().Leases(corev1.NamespaceNodeLease), node.DefaultLeaseDuration))
	if err != nil {
		fail("node controller", err)
		return
	}
	wg.Go(func() { vn.pods.Run(ctx, vn.podCtl.Ready()) })
	wg.Go(func() { vn.nodes.Run(ctx) })
	wg.Go(func() { fail("node controller", nodeCtl.Run(ctx)) })
	select {
	case <-ctx.Done():
	case <-nodeCtl.Ready():
		if err := syncTaints(ctx, cfg.HostClient, vn.nodes.Node()); err != nil {
			log.G(ctx).WithError(err).Warn("cannot set the configured taints on the virtual node")
		}
		log.G(ctx).WithField("port", vn.vc.KubeletPort).Info("virtual node running")
		close(up)
	}
}

// minWorkersPerNode is the fewest workers of each kind a virtual node gets
// (unless the process has fewer), so that one slow pod never holds up the
// rest of its partition.
const minWorkersPerNode = 2

// workersPerNode divides a process's workers among its virtual nodes. Each
// virtual node runs its own pod controller (three queues with that many
// workers each) and status workers; fifty partitions with the whole
// budget each would idle some 5,000 goroutines and, in a burst, send the
// host more concurrent writes under one identity than its API priority
// and fairness queues hold — it answers 429 and the node's own status
// updates wait in the same queues.
func workersPerNode(total, nodes int) int {
	if nodes < 1 {
		nodes = 1
	}
	return max(min(minWorkersPerNode, total), (total+nodes-1)/nodes)
}

// perItemBackoff retries a failing item with exponential backoff, with no
// limit on how fast distinct items are processed.
func perItemBackoff() workqueue.TypedRateLimiter[any] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, 1000*time.Second)
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// readyz checks the member apiserver's readiness endpoint.
type readyz struct{ c kube.Interface }

// Healthy asks the member's /readyz. A failed check is reported once, by
// clusternode with the error; Do would log as well, at error level, an
// answer whose body did not come in time, which a member apiserver busy
// with a burst of pods may send.
func (r readyz) Healthy(ctx context.Context) error {
	body, err := r.c.Discovery().RESTClient().Get().AbsPath("/readyz").Stream(ctx)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, body)
	return errors.Join(err, body.Close())
}

// quietSuccess drops virtual-kubelet's "ProviderCreateSuccess",
// "ProviderUpdateSuccess" and "ProviderDeleteSuccess" events: a kubelet
// reports no such thing, they say only that the pod is doing what its status
// already shows, and each costs a host write per pod. Failures and every
// other event pass through.
type quietSuccess struct {
	record.EventRecorder
}

var providerSuccess = map[string]bool{
	"ProviderCreateSuccess": true, "ProviderUpdateSuccess": true, "ProviderDeleteSuccess": true,
}

func quiet(eventType, reason string) bool {
	return eventType == corev1.EventTypeNormal && providerSuccess[reason]
}

func (q quietSuccess) Event(obj runtime.Object, eventType, reason, message string) {
	if !quiet(eventType, reason) {
		q.EventRecorder.Event(obj, eventType, reason, message)
	}
}

func (q quietSuccess) Eventf(obj runtime.Object, eventType, reason, messageFmt string, args ...any) {
	if !quiet(eventType, reason) {
		q.EventRecorder.Eventf(obj, eventType, reason, messageFmt, args...)
	}
}

func (q quietSuccess) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventType, reason, messageFmt string, args ...any) {
	if !quiet(eventType, reason) {
		q.EventRecorder.AnnotatedEventf(obj, annotations, eventType, reason, messageFmt, args...)
	}
}

// growShapes is what the fit model says about growth: nil for a cluster
// that cannot grow.
func growShapes(pl *v1alpha1.Placement) []fit.NodeShape {
	if pl == nil || pl.Growable == nil || !*pl.Growable {
		return nil
	}
	out := []fit.NodeShape{}
	for _, s := range pl.NodeShapes {
		out = append(out, fit.NodeShape{Labels: s.Labels, Taints: s.Taints, Allocatable: s.Allocatable})
	}
	return out
}

// handBackAfter is how long a forwarded pod may stay unschedulable in the
// member: nodeProvisionTimeout where an autoscaler may add a node for it.
func handBackAfter(pl *v1alpha1.Placement) time.Duration {
	switch {
	case pl == nil:
		return nodeconfig.DefaultHandBackAfter
	case pl.Growable != nil && *pl.Growable && pl.NodeProvisionTimeout != nil:
		return pl.NodeProvisionTimeout.Duration
	case pl.HandBackAfter != nil:
		return pl.HandBackAfter.Duration
	}
	return nodeconfig.DefaultHandBackAfter
}

// ownNodes selects the host nodes of the virtual clusters named: each
// virtual node carries its name in wellknown.ClusterLabel.
func ownNodes(names []string) (labels.Selector, error) {
	r, err := labels.NewRequirement(wellknown.ClusterLabel, selection.In, names)
	if err != nil {
		return nil, fmt.Errorf("virtual node names: %w", err)
	}
	return labels.NewSelector().Add(*r), nil
}

// Package flotillanode runs one flotilla-node process: the virtual nodes of one
// member cluster — the whole member, or each of its label partitions — over
// a single set of member informers, so that the member apiserver sees the
// same watch load for fifty partitions as for one. Each virtual node has its
// own node controller and lease, pod controller and kubelet endpoint,
// assembled from virtual-kubelet's node package.
package flotillanode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	corev1informers "k8s.io/client-go/informers/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/clusternode"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/kubeletauth"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podfields"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/override/hostpolicies"
	"flotilla.io/flotilla/provider"
	"flotilla.io/flotilla/provider/mirror"
)

// Config holds what an agent needs; all fields but the tuning ones are required.
type Config struct {
	// HostClient acts in the host as the installation: it reads what the
	// virtual nodes share, and registers and renews them.
	HostClient kube.Interface
	// NodeClient returns a host client acting as the named virtual node
	// (system:node:<name>, see rbac.NodeUsers), which makes every write to
	// that node's pods and reads the Secrets and ConfigMaps they use, so
	// that the host's Node authorizer and NodeRestriction confine it as
	// they confine a kubelet. Nil uses HostClient for everything.
	NodeClient func(node string) (kube.Interface, error)
	// HostConfig, when set, lets the agent read the host's override
	// policies and apply them to the pods it forwards.
	HostConfig   *rest.Config
	MemberClient kube.Interface
	// MemberConfig is used for streaming calls (exec, attach, port-forward).
	MemberConfig *rest.Config
	// HostMultiCluster (the installation's) and MemberMultiCluster, when
	// both set, are the clients of the Multi-Cluster Services API: the
	// member imports the fleet's exported Services and relays its own.
	HostMultiCluster, MemberMultiCluster mcsclient.Interface
	// Installation identifies the host cluster on every member object.
	Installation string
	// Member is the member cluster's name and Mode how flotilla-node
	// reaches it ("push" or "pull"), published on every virtual node.
	Member, Mode string
	// VirtualClusters are the virtual nodes to run (validated, defaulted).
	VirtualClusters []v1alpha1.VirtualCluster
	// NodeIP is where the host apiserver reaches the kubelet endpoints.
	NodeIP string
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
	// VersionInterval is how often the host's and the member's Kubernetes
	// versions are read besides when a link comes back (default: a
	// minute); the virtual nodes show them (see
	// wellknown.NodeKubernetesVersionSupported).
	VersionInterval time.Duration
	// SyncTimeout bounds the wait for the member's caches before the
	// virtual nodes register anyway (NotReady if the member is unreachable).
	SyncTimeout time.Duration

	// Metrics, when set, measures forwarding; Registerer, when set, gets the
	// virtual nodes' gauges (pods, readiness, backlog).
	Metrics    *provider.Metrics
	Registerer prometheus.Registerer
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
	ctx, stop := context.WithCancelCause(ctx)
	s := newShared(a.cfg)
	defer func() {
		s.shutdown(stop)
		a.err = err
		close(a.done)
	}()
	if err := s.initHostPods(); err != nil {
		return err
	}
	if err := s.initHostNodeInformers(); err != nil {
		return err
	}
	s.startEvents()
	if err := s.initOverrides(ctx); err != nil {
		return err
	}
	s.initHealth()
	s.initPodFields(ctx)
	s.initMultiCluster(ctx)
	if err := s.initPodCaches(); err != nil {
		return err
	}
	vns, err := s.newVirtualNodes()
	if err != nil {
		return err
	}
	if err := s.registerGauges(vns); err != nil {
		return err
	}
	s.startVersions(ctx, vns)
	s.startInformers(ctx)
	s.startVirtualNodes(ctx, stop, vns, a.ready)
	<-ctx.Done()
	stop(nil) // a no-op if a virtual node failed first: its cause stays
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// shared is what the virtual nodes of one Run share: one set of member
// informers, the host's informers, one event broadcaster, the override
// policies and one health check of the member. Its init* steps run in
// Run's order; shutdown undoes them all.
type shared struct {
	// cfg is the agent's configuration with the workers divided among the
	// virtual nodes.
	cfg   Config
	names []string // of the virtual nodes

	member    *kube.Factory
	host      *kube.Factory // what the virtual nodes share (namespaces, Services, ...)
	hostNodes *kube.Factory // the process's own nodes
	// nodeClients act in the host as each virtual node; podInformers watch,
	// as each, the pods bound to it (the Node authorizer lets a node list
	// only those).
	nodeClients  map[string]kube.Interface
	podInformers map[string]corev1informers.PodInformer
	// factories are shut down, in order, when Run returns.
	factories []*kube.Factory

	broadcaster record.EventBroadcaster
	overrides   provider.Overrides
	health      clusternode.HealthChecker
	memberPods  *clusternode.MemberPods
	versions    *versionWatch
	// fields is what the member's API knows of pods, memberBack asks for
	// it to be read again (the member's version changed), and
	// hostOnlyFields are the pod fields the host serves and flotilla's
	// types do not know (pod_fields.go).
	fields         *podfields.Member
	memberBack     chan struct{}
	hostOnlyFields []string
	// hostLacks are the pod status fields flotilla's types know and the
	// host (at hostVersion) does not serve.
	hostLacks   []string
	hostVersion string
	// multiCluster is what the Multi-Cluster Services mirrors share (nil
	// when the API is off), mcsFactories its informers, and
	// multiClusterState what the virtual nodes show of it.
	multiCluster      *mirror.MultiCluster
	mcsFactories      []mcsinformers.SharedInformerFactory
	multiClusterState string
	// wg counts the goroutines of the virtual nodes.
	wg sync.WaitGroup
}

// newShared sets up the member's and the host pods' informers, not yet
// started, and the event broadcaster, not yet recording.
func newShared(cfg Config) *shared {
	cfg.PodWorkers = workersPerNode(cfg.PodWorkers, len(cfg.VirtualClusters))
	cfg.StatusWorkers = workersPerNode(cfg.StatusWorkers, len(cfg.VirtualClusters))
	s := &shared{cfg: cfg, broadcaster: record.NewBroadcaster()}
	for _, vc := range cfg.VirtualClusters {
		s.names = append(s.names, vc.Name)
	}
	// Member pods this installation forwarded are cached with only what
	// flotilla reads of them; see podcache.MemberPodTransform.
	var memberPodStore cache.Store // set before the informer starts
	s.member = kube.NewFactory(cfg.MemberClient,
		kube.WithTransform(podcache.MemberPodsTransform(cfg.Installation, func() cache.Store { return memberPodStore })))
	memberPodStore = s.member.Pods().Informer().GetStore()
	s.host = kube.NewFactory(cfg.HostClient, kube.WithTransform(podcache.HostObjectTransform))
	s.factories = []*kube.Factory{s.member, s.host}
	s.versions = newVersionWatch(cfg.HostClient, cfg.MemberClient, cfg.VersionInterval, clock.RealClock{})
	return s
}

// shutdown stops everything Run started and waits for it. Everything stops
// on the cancelled context; Shutdown waits for the informers' goroutines, wg
// for the rest; the events they recorded on their way out are sent before
// the broadcaster goes.
func (s *shared) shutdown(stop context.CancelCauseFunc) {
	stop(nil)
	for _, f := range s.factories {
		f.Shutdown()
	}
	for _, f := range s.mcsFactories {
		f.Shutdown()
	}
	s.wg.Wait()
	s.broadcaster.Shutdown()
}

// initHostPods makes each virtual node's host client and the informer of
// the host pods bound to it, listed and watched as that node.
func (s *shared) initHostPods() error {
	s.nodeClients = map[string]kube.Interface{}
	s.podInformers = map[string]corev1informers.PodInformer{}
	for _, name := range s.names {
		client, err := actingAs(s.cfg.HostClient, s.cfg.NodeClient, name)
		if err != nil {
			return err
		}
		var store cache.Store // set before the informer starts
		pods := kube.NewFactory(client,
			kube.WithTransform(podcache.HostPodsTransform([]string{name}, func() cache.Store { return store })),
			kube.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = podcache.HostPodSelector([]string{name}) }))
		inf := pods.Pods()
		store = inf.Informer().GetStore()
		if err := podcache.IndexHostPodsByNode(inf); err != nil {
			return err
		}
		s.nodeClients[name], s.podInformers[name] = client, inf
		s.factories = append(s.factories, pods)
	}
	return nil
}

// initHostNodeInformers sets up the informers of the host's nodes. Of
// them, only the process's own are read (override policies target their
// labels); watching all would have every flotilla-node decode every other
// member's node updates.
func (s *shared) initHostNodeInformers() error {
	own, err := ownNodes(s.names)
	if err != nil {
		return err
	}
	s.hostNodes = kube.NewFactory(s.cfg.HostClient, kube.WithTransform(podcache.HostObjectTransform),
		kube.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = own.String() }))
	s.factories = append(s.factories, s.hostNodes)
	return nil
}

// startVersions reads the host's and the member's Kubernetes versions
// before the virtual nodes register, so that they register with them, and
// then keeps them current: every VersionInterval, and whenever the
// informers of either cluster find a lost link back (an upgrade restarts
// apiservers).
func (s *shared) startVersions(ctx context.Context, vns []*virtualNode) {
	for _, f := range s.factories {
		f.OnReconnect(s.versions.reconnected)
	}
	s.versions.read(ctx)
	for _, vn := range vns {
		s.versions.subscribe(vn.nodes.SetVersions)
	}
	// A member at a new version serves another pod schema.
	s.versions.subscribe(s.memberVersionSeen)
	s.wg.Go(func() { s.versions.run(ctx) })
}

// startEvents sends the events the virtual nodes record to the host.
func (s *shared) startEvents() {
	s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.cfg.HostClient.CoreV1().Events("")})
}

// initOverrides starts reading the host's override policies, when the
// agent may.
func (s *shared) initOverrides(ctx context.Context) error {
	if s.cfg.HostConfig == nil {
		return nil
	}
	nodes := s.hostNodes.Nodes().Lister()
	o, err := hostpolicies.Start(ctx, s.cfg.HostConfig, nodes)
	if err != nil {
		return fmt.Errorf("override policies: %w", err)
	}
	s.overrides = o
	return nil
}

// initHealth sets up one health check of the member, however many virtual
// nodes ask.
func (s *shared) initHealth() {
	var check clusternode.HealthChecker = readyz{s.cfg.MemberClient}
	if s.cfg.Health != nil {
		check = s.cfg.Health
	}
	s.health = newSharedHealth(check, s.cfg.HealthInterval/2, s.cfg.HealthInterval, clock.RealClock{})
}

// initPodCaches sets up one count of what the member's pods request,
// however many virtual nodes stand for the member.
func (s *shared) initPodCaches() error {
	memberPods, err := clusternode.NewMemberPods(s.member)
	if err != nil {
		return err
	}
	s.memberPods = memberPods
	return nil
}

// newVirtualNodes assembles the virtual nodes, none of them running yet.
func (s *shared) newVirtualNodes() ([]*virtualNode, error) {
	var vns []*virtualNode
	for _, vc := range s.cfg.VirtualClusters {
		vn, err := s.newVirtualNode(vc)
		if err != nil {
			return nil, fmt.Errorf("virtual node %s: %w", vc.Name, err)
		}
		vns = append(vns, vn)
	}
	return vns, nil
}

// registerGauges gives the virtual nodes' gauges to the configured
// registerer.
func (s *shared) registerGauges(vns []*virtualNode) error {
	if s.cfg.Registerer == nil {
		return nil
	}
	if err := s.cfg.Registerer.Register(nodeGauges(vns)); err != nil {
		return fmt.Errorf("register node metrics: %w", err)
	}
	return nil
}

// startInformers starts the member's informers and waits, up to
// SyncTimeout, for its nodes and pods, then starts the host's.
func (s *shared) startInformers(ctx context.Context) {
	s.member.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, s.cfg.SyncTimeout)
	synced := cache.WaitForCacheSync(syncCtx.Done(),
		s.member.Nodes().Informer().HasSynced,
		s.member.Pods().Informer().HasSynced)
	cancel()
	if !synced {
		log.G(ctx).WithField("timeout", s.cfg.SyncTimeout).Warn("member caches did not sync; registering the nodes from what is known")
	}
	for _, f := range s.factories {
		if f != s.member {
			f.Start(ctx.Done())
		}
	}
	for _, f := range s.mcsFactories {
		f.Start(ctx.Done())
	}
}

// startVirtualNodes runs every virtual node and closes ready once all of
// them are running; the first to fail stops the others through stop.
func (s *shared) startVirtualNodes(ctx context.Context, stop context.CancelCauseFunc, vns []*virtualNode, ready chan<- struct{}) {
	running := make([]<-chan struct{}, 0, len(vns))
	for _, vn := range vns {
		up := make(chan struct{})
		running = append(running, up)
		s.wg.Go(func() { vn.run(ctx, s.cfg, stop, &s.wg, up) })
	}
	s.wg.Go(func() {
		for _, up := range running {
			select {
			case <-ctx.Done():
				return
			case <-up:
			}
		}
		close(ready)
	})
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

// ownNodes selects the host nodes of the virtual clusters named: each
// virtual node carries its name in wellknown.ClusterLabel.
func ownNodes(names []string) (labels.Selector, error) {
	r, err := labels.NewRequirement(wellknown.ClusterLabel, selection.In, names)
	if err != nil {
		return nil, fmt.Errorf("virtual node names: %w", err)
	}
	return labels.NewSelector().Add(*r), nil
}

// This file assembles one virtual node from virtual-kubelet's pod and node
// controllers, flotilla's node and pod providers and a kubelet endpoint,
// and runs it.

package flotillanode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/clusternode"
	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/kubeletauth"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/nodeconfig"
	"flotilla.io/flotilla/provider"
)

// virtualNode is one running virtual node.
type virtualNode struct {
	vc v1alpha1.VirtualCluster
	// client acts in the host as this virtual node (Config.NodeClient).
	client   kube.Interface
	nodes    *clusternode.Source
	recorder record.EventRecorder
	pods     *provider.Provider
	podCtl   *node.PodController
	handler  http.Handler
}

// newVirtualNode assembles the virtual node of vc over what s shares; none
// of it runs before run.
func (s *shared) newVirtualNode(vc v1alpha1.VirtualCluster) (*virtualNode, error) {
	// virtual-kubelet's pod controller treats every pod of its informer as
	// its own: podInformer shows it this node's.
	podInformer := podcache.NodePodInformer(s.podInformers[vc.Name], vc.Name)
	client := s.nodeClients[vc.Name]
	// The pods follow the member's reachability (provider.MemberReachable);
	// the provider is made after the node source that watches it.
	var pods *provider.Provider
	nodes, err := s.newNodeProvider(vc, func() {
		if pods != nil {
			pods.MemberReachabilityChanged()
		}
	})
	if err != nil {
		return nil, err
	}
	recorder := s.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "flotilla-node", Host: vc.Name})
	pods, err = s.newPodProvider(vc, client, podInformer, recorder, nodes.MemberReachable)
	if err != nil {
		return nil, err
	}
	if s.cfg.Metrics != nil {
		// Ahead of the pod controller's handler: the create latency counts
		// from the moment the host pod is seen.
		if _, err := podInformer.Informer().AddEventHandler(pods.HostPodEvents()); err != nil {
			return nil, err
		}
	}
	podCtl, err := s.newPodController(client, podInformer, recorder, pods)
	if err != nil {
		return nil, err
	}
	handler, err := s.newKubeletHandler(vc, pods, podInformer)
	if err != nil {
		return nil, err
	}
	return &virtualNode{vc: vc, client: client, nodes: nodes, recorder: recorder, pods: pods, podCtl: podCtl, handler: handler}, nil
}

// newNodeProvider is what makes the virtual node's corev1.Node of the
// member's nodes in vc's slice.
func (s *shared) newNodeProvider(vc v1alpha1.VirtualCluster, reachabilityChanged func()) (*clusternode.Source, error) {
	cfg := s.cfg
	return clusternode.NewSource(clusternode.SourceConfig{
		Node: clusternode.Config{
			Name:                 vc.Name,
			Installation:         cfg.Installation,
			Member:               cfg.Member,
			Mode:                 cfg.Mode,
			NamespaceMapping:     string(vc.NamespaceMapping),
			MultiClusterServices: s.multiClusterState,
			Selector:             nodeconfig.Selector(vc),
			Labels:               vc.Labels,
			Taints:               vc.Taints,
			Region:               vc.Region,
			Zone:                 vc.Zone,
			Provider:             vc.Provider,
			InternalIP:           cfg.NodeIP,
			KubeletPort:          vc.KubeletPort,
			Grow:                 growShapes(vc.Placement),
		},
		Informers:           s.member,
		Pods:                s.memberPods,
		Health:              s.health,
		HealthInterval:      cfg.HealthInterval,
		FailureThreshold:    cfg.FailureThreshold,
		KubeletAPI:          kubeletAPIProbe(cfg, vc.Name),
		KubeletAPIInterval:  cfg.KubeletAPIProbeInterval,
		Fields:              s.fields,
		ReachabilityChanged: reachabilityChanged,
	})
}

// newPodProvider is what forwards the virtual node's pods to the member.
func (s *shared) newPodProvider(vc v1alpha1.VirtualCluster, client kube.Interface, podInformer corev1informers.PodInformer, recorder record.EventRecorder, memberReachable func() bool) (*provider.Provider, error) {
	cfg := s.cfg
	mapper := provider.SameName
	if vc.NamespaceMapping == v1alpha1.Suffix {
		mapper = provider.Suffix(vc.Name)
	}
	return provider.New(provider.Config{
		NodeName:        vc.Name,
		Installation:    cfg.Installation,
		HostPods:        podInformer,
		HostClient:      client,
		Recorder:        recorder,
		MemberClient:    cfg.MemberClient,
		MemberConfig:    cfg.MemberConfig,
		MemberInformers: s.member,
		HostInformers:   s.host,
		Namespace:       mapper,
		Partition:       vc.NodeSelector,
		StatusWorkers:   cfg.StatusWorkers,
		MirrorEvents:    true,
		Overrides:       s.overrides,
		Metrics:         cfg.Metrics,
		HandBackAfter:   handBackAfter(vc.Placement),
		StorageClasses:  vc.StorageClasses,
		Fields:          s.fields,
		HostOnlyFields:  s.hostOnlyFields,
		HostLacks:       s.hostLacks,
		HostVersion:     s.hostVersion,
		MultiCluster:    s.multiClusterFor(vc.Name),
		MemberReachable: memberReachable,
	})
}

// newPodController is virtual-kubelet's pod controller over the virtual
// node's pods.
func (s *shared) newPodController(client kube.Interface, podInformer corev1informers.PodInformer, recorder record.EventRecorder, pods *provider.Provider) (*node.PodController, error) {
	return node.NewPodController(node.PodControllerConfig{
		PodClient:     client.CoreV1(),
		PodInformer:   podcache.PodInformerForVirtualKubelet(podInformer),
		EventRecorder: quietSuccess{recorder},
		Provider:      pods,
		// The informer only holds this node's pods; the filter spares
		// virtual-kubelet the last update of a pod already gone below.
		PodEventFilterFunc: pods.PodEventFilter,
		// virtual-kubelet requires these, and only takes their listers,
		// for the resolution SkipDownwardAPIResolution turns off. Never
		// started nor in the host factory, they list nothing: a node may
		// not list Secrets or ConfigMaps (the provider watches those its
		// pods use, one at a time).
		ConfigMapInformer: kube.ConfigMapInformer(kube.NewInformer(s.cfg.HostClient, &corev1.ConfigMap{}, metav1.NamespaceAll, 0, nil, cache.Indexers{})),
		SecretInformer:    kube.SecretInformer(kube.NewInformer(s.cfg.HostClient, &corev1.Secret{}, metav1.NamespaceAll, 0, nil, cache.Indexers{})),
		ServiceInformer:   s.host.Services(),
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
}

// newKubeletHandler serves the virtual node's kubelet API (logs, exec,
// attach, port-forward, stats) to the callers its auth lets in.
func (s *shared) newKubeletHandler(vc v1alpha1.VirtualCluster, pods *provider.Provider, podInformer corev1informers.PodInformer) (http.Handler, error) {
	kubelet, err := s.cfg.Kubelet(vc, pods)
	if err != nil {
		return nil, fmt.Errorf("kubelet endpoint of virtual node %s: %w", vc.Name, err)
	}
	mux := kubeletMux(kubelet, podInformer)
	auth, err := s.cfg.Auth(vc.Name)
	if err != nil {
		return nil, err
	}
	return kubeletauth.Handler(auth, mux, log.L.WithField("node", vc.Name)), nil
}

// kubeletMux routes the kubelet API to kubelet, and /healthz.
func kubeletMux(kubelet provider.KubeletAPI, podInformer corev1informers.PodInformer) *http.ServeMux {
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
	return mux
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
	if err := vn.serveKubelet(ctx, cfg, wg, fail); err != nil {
		fail("kubelet endpoint", err)
		return
	}

	wg.Go(func() { fail("pod controller", vn.podCtl.Run(ctx, cfg.PodWorkers)) })
	select {
	case <-ctx.Done():
		return
	case <-vn.podCtl.Ready():
	}
	// The node is registered only now, with the capacity of the member
	// caches that have synced, rather than empty.
	nodeCtl, err := node.NewNodeController(&versionEvents{NodeProvider: vn.nodes, recorder: vn.recorder}, vn.nodes.Node(), cfg.HostClient.CoreV1().Nodes(),
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

// serveKubelet serves the virtual node's kubelet endpoint until ctx ends;
// an error is the failure to listen, fail gets the server's.
func (vn *virtualNode) serveKubelet(ctx context.Context, cfg Config, wg *sync.WaitGroup, fail func(string, error)) error {
	ln, err := tls.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(int(vn.vc.KubeletPort))), &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cfg.ServingCert},
		ClientAuth:   tls.RequestClientCert,
	})
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: vn.handler, ReadHeaderTimeout: 30 * time.Second}
	wg.Go(func() { fail("kubelet endpoint", ignoreClosed(srv.Serve(ln))) })
	wg.Go(func() {
		<-ctx.Done()
		_ = srv.Close()
	})
	return nil
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

// actingAs is the host client that acts as the virtual node name: made by
// nodeClient, or host itself when there is none.
func actingAs(host kube.Interface, nodeClient func(string) (kube.Interface, error), name string) (kube.Interface, error) {
	if nodeClient == nil {
		return host, nil
	}
	c, err := nodeClient(name)
	if err != nil {
		return nil, fmt.Errorf("host client acting as node %s: %w", name, err)
	}
	return c, nil
}

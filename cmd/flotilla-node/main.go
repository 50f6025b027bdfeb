// Command flotilla-node registers a member cluster as a virtual node in the
// host cluster and forwards the pods placed on it. Run one per member cluster.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	logruslogger "github.com/virtual-kubelet/virtual-kubelet/log/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/cert"

	"flotilla.io/flotilla/clusternode"
	"flotilla.io/flotilla/internal/kubeconfig"
	"flotilla.io/flotilla/provider"
)

type options struct {
	clusterName      string
	installation     string
	hostKubeconfig   string
	memberKubeconfig string
	nodeIP           string
	listenPort       int
	tlsCertFile      string
	tlsKeyFile       string
	clientCAFile     string
	nodeLabels       map[string]string
	region           string
	zone             string
	providerName     string
	hostQPS          float32
	hostBurst        int
	memberQPS        float32
	memberBurst      int
	podWorkers       int
	statusWorkers    int
	healthInterval   time.Duration
	healthFailures   int
	syncTimeout      time.Duration
	logLevel         string
	logFormat        string
	profilingAddress string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-node:", err)
		os.Exit(1)
	}
}

func parseFlags() (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("flotilla-node", pflag.ContinueOnError)
	fs.StringVar(&o.clusterName, "cluster-name", "", "name of the member cluster; also the virtual node's name (required)")
	fs.StringVar(&o.installation, "installation-id", "", "identity of this flotilla installation, written on every member object it creates so that hosts sharing a member never touch each other's objects (default: the UID of the host's kube-system namespace)")
	fs.StringVar(&o.hostKubeconfig, "host-kubeconfig", "", "kubeconfig of the host cluster; empty means the in-cluster configuration")
	fs.StringVar(&o.memberKubeconfig, "member-kubeconfig", "", "kubeconfig of the member cluster (required)")
	fs.StringVar(&o.nodeIP, "node-ip", "", "address the host apiserver uses to reach this process's kubelet endpoint; must not be loopback (default: first non-loopback address)")
	fs.IntVar(&o.listenPort, "kubelet-port", 10250, "port of the kubelet endpoint (logs, exec, attach)")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "serving certificate of the kubelet endpoint; a self-signed one is generated when empty")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	fs.StringVar(&o.clientCAFile, "client-ca-file", "", "CA that signs client certificates allowed to call the kubelet endpoint (e.g. the host apiserver's kubelet client)")
	fs.StringToStringVar(&o.nodeLabels, "node-labels", nil, "extra labels for the virtual node")
	fs.StringVar(&o.region, "region", "", "topology.kubernetes.io/region of the virtual node (default: uniform value of the member's nodes)")
	fs.StringVar(&o.zone, "zone", "", "topology.kubernetes.io/zone of the virtual node (default: uniform value of the member's nodes)")
	fs.StringVar(&o.providerName, "provider", "", "value of the flotilla.io/provider label")
	fs.Float32Var(&o.hostQPS, "host-qps", 500, "QPS of the host client; client-go's default of 5 would cap forwarding at a few pods per second")
	fs.IntVar(&o.hostBurst, "host-burst", 1000, "burst of the host client")
	fs.Float32Var(&o.memberQPS, "member-qps", 500, "QPS of the member client")
	fs.IntVar(&o.memberBurst, "member-burst", 1000, "burst of the member client")
	fs.IntVar(&o.podWorkers, "pod-sync-workers", 32, "workers that forward pod changes to the member")
	fs.IntVar(&o.statusWorkers, "status-sync-workers", 16, "workers that push member pod status to the host")
	fs.DurationVar(&o.healthInterval, "member-health-interval", 5*time.Second, "how often the member apiserver's /readyz is checked")
	fs.IntVar(&o.healthFailures, "member-failure-threshold", 2, "failed health checks in a row after which the virtual node turns NotReady (grace period = interval x threshold)")
	fs.DurationVar(&o.syncTimeout, "member-sync-timeout", 30*time.Second, "how long to wait for the member's caches before registering the node anyway (NotReady)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.profilingAddress, "profiling-address", "", "loopback host:port serving net/http/pprof (e.g. 127.0.0.1:6060); empty disables profiling")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return nil, err
	}
	switch {
	case o.clusterName == "":
		return nil, errors.New("--cluster-name is required")
	case o.memberKubeconfig == "":
		return nil, errors.New("--member-kubeconfig is required")
	case (o.tlsCertFile == "") != (o.tlsKeyFile == ""):
		return nil, errors.New("--tls-cert-file and --tls-private-key-file must be given together")
	case o.profilingAddress != "" && !isLoopbackAddress(o.profilingAddress):
		return nil, fmt.Errorf("--profiling-address %q: want a loopback host:port; profiles expose memory contents", o.profilingAddress)
	}
	return o, nil
}

func setupLogging(o *options) error {
	logger := logrus.New()
	level, err := logrus.ParseLevel(o.logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger.SetLevel(level)
	switch o.logFormat {
	case "json":
		logger.SetFormatter(&logrus.JSONFormatter{})
	case "text":
		logger.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	default:
		return fmt.Errorf("--log-format: want text or json, got %q", o.logFormat)
	}
	log.L = logruslogger.FromLogrus(logrus.NewEntry(logger).WithField("cluster", o.clusterName))
	return nil
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	if err := setupLogging(o); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if o.profilingAddress != "" {
		go serveProfiling(ctx, o.profilingAddress)
	}

	hostCfg, err := kubeconfig.Load("host", o.hostKubeconfig, true, o.hostQPS, o.hostBurst)
	if err != nil {
		return err
	}
	memberCfg, err := kubeconfig.Load("member", o.memberKubeconfig, false, o.memberQPS, o.memberBurst)
	if err != nil {
		return err
	}
	hostClient, err := kubernetes.NewForConfig(hostCfg)
	if err != nil {
		return fmt.Errorf("host client: %w", err)
	}
	memberClient, err := kubernetes.NewForConfig(memberCfg)
	if err != nil {
		return fmt.Errorf("member client: %w", err)
	}
	installation := o.installation
	if installation == "" {
		ns, err := hostClient.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("identify the host cluster by its kube-system namespace (or set --installation-id): %w", err)
		}
		installation = string(ns.UID)
	}
	nodeIP := o.nodeIP
	if nodeIP == "" {
		if nodeIP, err = firstNonLoopbackIP(); err != nil {
			return err
		}
	}

	// One set of member informers serves the node computation and the pod
	// forwarding alike. Managed fields are dropped: nobody here reads them
	// and they are a large part of every cached object.
	memberInformers := informers.NewSharedInformerFactoryWithOptions(memberClient, 0,
		informers.WithTransform(stripManagedFields))

	// Host namespaces (and later the objects pods depend on) are watched
	// through one host factory.
	hostInformers := informers.NewSharedInformerFactoryWithOptions(hostClient, 0,
		informers.WithTransform(stripManagedFields))

	nodeProvider, err := clusternode.NewProvider(clusternode.ProviderConfig{
		Node: clusternode.Config{
			Name:           o.clusterName,
			Labels:         o.nodeLabels,
			Region:         o.region,
			Zone:           o.zone,
			Provider:       o.providerName,
			InternalIP:     nodeIP,
			KubeletPort:    int32(o.listenPort),
			KubeletVersion: memberVersion(ctx, memberClient),
		},
		Informers:        memberInformers,
		Health:           readyz{memberClient},
		HealthInterval:   o.healthInterval,
		FailureThreshold: o.healthFailures,
	})
	if err != nil {
		return err
	}

	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: hostClient.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "flotilla-node", Host: o.clusterName})

	var podProvider *provider.Provider
	newProvider := func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		podProvider, err = provider.New(provider.Config{
			NodeName:        o.clusterName,
			Installation:    installation,
			HostPods:        pc.Pods,
			HostClient:      hostClient,
			Recorder:        recorder,
			MemberClient:    memberClient,
			MemberConfig:    memberCfg,
			MemberInformers: memberInformers,
			StatusWorkers:   o.statusWorkers,
			Events:          broadcaster,
			HostInformers:   hostInformers,
		})
		return podProvider, nodeProvider, err
	}

	memberInformers.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, o.syncTimeout)
	synced := cache.WaitForCacheSync(syncCtx.Done(),
		memberInformers.Core().V1().Nodes().Informer().HasSynced,
		memberInformers.Core().V1().Pods().Informer().HasSynced)
	cancel()
	if !synced {
		log.G(ctx).WithField("timeout", o.syncTimeout).Warn("member caches did not sync; registering the node from what is known")
	}

	tlsOpt, err := servingTLS(o, nodeIP)
	if err != nil {
		return err
	}
	auth, err := kubeletAuth(hostClient, o)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	vk, err := nodeutil.NewNode(o.clusterName, newProvider,
		nodeutil.WithClient(hostClient),
		tlsOpt,
		nodeutil.AttachProviderRoutes(mux),
		func(cfg *nodeutil.NodeConfig) error {
			cfg.NodeSpec = *nodeProvider.Node()
			cfg.HTTPListenAddr = net.JoinHostPort("", strconv.Itoa(o.listenPort))
			cfg.Handler = nodeutil.WithAuth(auth, mux)
			cfg.NumWorkers = o.podWorkers
			cfg.EventRecorder = recorder
			// Secrets and ConfigMaps are mirrored as objects, never inlined
			// into the forwarded pod spec.
			cfg.SkipDownwardAPIResolution = true
			cfg.InformerResyncPeriod = 0
			return nil
		},
	)
	if err != nil {
		return fmt.Errorf("set up virtual node: %w", err)
	}
	// The provider registered further member informers (events, ...) while
	// the node was being set up; Start only starts those not running yet.
	memberInformers.Start(ctx.Done())
	hostInformers.Start(ctx.Done())
	go nodeProvider.Run(ctx)
	go podProvider.Run(ctx, vk.PodController().Ready())
	log.G(ctx).WithField("nodeIP", nodeIP).WithField("port", o.listenPort).Info("starting virtual node")
	if err := vk.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func memberVersion(ctx context.Context, c kubernetes.Interface) string {
	v, err := c.Discovery().ServerVersion()
	if err != nil {
		log.G(ctx).WithError(err).Warn("cannot read the member's version")
		return "unknown"
	}
	return v.GitVersion
}

// readyz checks the member apiserver's readiness endpoint.
type readyz struct{ c kubernetes.Interface }

func (r readyz) Healthy(ctx context.Context) error {
	return r.c.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

func servingTLS(o *options, nodeIP string) (nodeutil.NodeOpt, error) {
	var pair tls.Certificate
	var err error
	if o.tlsCertFile != "" {
		pair, err = tls.LoadX509KeyPair(o.tlsCertFile, o.tlsKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load serving certificate %s: %w", o.tlsCertFile, err)
		}
	} else {
		certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(o.clusterName, []net.IP{net.ParseIP(nodeIP)}, nil)
		if err != nil {
			return nil, fmt.Errorf("generate serving certificate: %w", err)
		}
		if pair, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return nil, fmt.Errorf("generate serving certificate: %w", err)
		}
	}
	return nodeutil.WithTLSConfig(func(c *tls.Config) error {
		c.Certificates = []tls.Certificate{pair}
		return nil
	}), nil
}

// kubeletAuth authenticates callers of the kubelet endpoint by client
// certificate (when a CA is given) or bearer token (TokenReview), and
// authorizes them with SubjectAccessReview on nodes/proxy, nodes/log, ...
func kubeletAuth(host kubernetes.Interface, o *options) (nodeutil.Auth, error) {
	var opts []nodeutil.WebhookAuthOption
	if o.clientCAFile != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", o.clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		opts = append(opts, func(c *nodeutil.WebhookAuthConfig) error {
			c.AuthnConfig.ClientCertificateCAContentProvider = ca
			return nil
		})
	}
	auth, err := nodeutil.WebhookAuth(host, o.clusterName, opts...)
	if err != nil {
		return nil, fmt.Errorf("kubelet endpoint auth: %w", err)
	}
	return auth, nil
}

func firstNonLoopbackIP() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("list addresses for --node-ip: %w", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", errors.New("no non-loopback address found; set --node-ip")
}

// serveProfiling serves net/http/pprof on addr until ctx ends. Profiling is a
// diagnostic aid, so failing to listen is logged rather than fatal.
func serveProfiling(ctx context.Context, addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.G(ctx).WithField("address", addr).Info("serving pprof")
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.G(ctx).WithError(err).WithField("address", addr).Error("pprof server failed")
	}
}

// isLoopbackAddress reports whether addr is host:port with a loopback IP or
// localhost as its host.
func isLoopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

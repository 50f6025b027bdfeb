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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	logruslogger "github.com/virtual-kubelet/virtual-kubelet/log/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/trace"
	vkotel "github.com/virtual-kubelet/virtual-kubelet/trace/opentelemetry"
	"go.opentelemetry.io/otel/attribute"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/component-base/metrics/legacyregistry"

	// client-go's work queue metrics, into legacyregistry (README,
	// "Metrics"): named work queues report only once a provider is set.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
	"k8s.io/klog/v2"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/flotillanode"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/kubeconfig"
	"flotilla.io/flotilla/internal/kubeletauth"
	"flotilla.io/flotilla/internal/logging"
	"flotilla.io/flotilla/internal/memlimit"
	"flotilla.io/flotilla/internal/telemetry"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/nodeconfig"
	"flotilla.io/flotilla/provider"
	"flotilla.io/flotilla/provider/stats"
)

type options struct {
	clusterName             string
	configFile              string
	installation            string
	hostKubeconfig          string
	multiClusterServices    bool
	mode                    string
	memberKubeconfig        string
	nodeIP                  string
	listenPort              int
	tlsCertFile             string
	tlsKeyFile              string
	clientCAFile            string
	nodeLabels              map[string]string
	region                  string
	zone                    string
	providerName            string
	hostQPS                 float32
	hostBurst               int
	memberQPS               float32
	memberBurst             int
	podWorkers              int
	statusWorkers           int
	healthInterval          time.Duration
	kubeletAPIProbeInterval time.Duration
	healthFailures          int
	syncTimeout             time.Duration
	logLevel                string
	logFormat               string
	profilingAddress        string
	anonymousAuth           bool
	remove                  bool
	leaderElect             bool
	leaderNamespace         string
	leaseDuration           time.Duration
	metricsAddress          string
	tracingEndpoint         string
	tracingSampling         float64
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-node:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("flotilla-node", pflag.ContinueOnError)
	fs.StringVar(&o.clusterName, "cluster-name", "", "name of the member cluster; also the virtual node's name unless --config splits the member (required)")
	fs.StringVar(&o.configFile, "config", "", "NodeConfig file (apiVersion flotilla.io/v1alpha1) splitting the member into label-partitioned virtual clusters; without it the whole member is one virtual node")
	fs.StringVar(&o.mode, "mode", "", "how flotilla-node reaches its member and the host, published on its virtual nodes (annotation flotilla.io/mode): push (it runs beside the host) or pull (it runs in the member and only dials out) (default: pull without --member-kubeconfig, push with it)")
	fs.StringVar(&o.installation, "installation-id", "", "identity of this flotilla installation, written on every member object it creates so that hosts sharing a member never touch each other's objects (default: the UID of the host's kube-system namespace)")
	fs.StringVar(&o.hostKubeconfig, "host-kubeconfig", "", "kubeconfig of the host cluster; empty means the in-cluster configuration (push mode: flotilla-node runs in the host)")
	fs.StringVar(&o.memberKubeconfig, "member-kubeconfig", "", "kubeconfig of the member cluster; empty means the in-cluster configuration (pull mode: flotilla-node runs in the member), allowed only with --host-kubeconfig")
	fs.StringVar(&o.nodeIP, "node-ip", "", "address the host apiserver uses to reach this process's kubelet endpoint; must not be loopback (default: first non-loopback address)")
	fs.IntVar(&o.listenPort, "kubelet-port", 10250, "port of the kubelet endpoint (logs, exec, attach); with several virtual clusters the first, the others counting up unless set in --config")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "serving certificate of the kubelet endpoint; a self-signed one is generated when empty")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	fs.StringVar(&o.clientCAFile, "client-ca-file", "", "CA that signs client certificates allowed to call the kubelet endpoint (e.g. the host apiserver's kubelet client)")
	fs.BoolVar(&o.multiClusterServices, "multicluster-services", true, "import the fleet's exported Services (ServiceExport, ServiceImport of multicluster.x-k8s.io) into the member and relay the member's own exports to the host; off when another Multi-Cluster Services implementation runs in the member")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "run as one of an active/standby pair for this member: only the holder of the Lease flotilla-node-<cluster-name> works; a standby takes over when the active one stops renewing it, adopting its member pods without moving any")
	fs.StringVar(&o.leaderNamespace, "leader-election-namespace", "default", "namespace of the leader Lease in the host")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the active one's last renewal before it takes over")
	fs.BoolVar(&o.remove, "remove", false, "take the member out of the fleet and exit, with flotilla-node stopped: cordon its virtual nodes, move their host pods elsewhere, delete everything they created in the member (pods, mirrored objects, the namespaces flotilla created), then the virtual nodes and their leases")
	fs.BoolVar(&o.anonymousAuth, "anonymous-auth", false, "treat requests to the kubelet endpoint without credentials as user system:anonymous, still authorized by SubjectAccessReview, as a kubelet's --anonymous-auth does (the apiserver's pods/proxy, for one, calls without credentials); off: such requests get 401")
	fs.StringToStringVar(&o.nodeLabels, "node-labels", nil, "extra labels for the virtual node")
	fs.StringVar(&o.region, "region", "", "topology.kubernetes.io/region of the virtual node (default: uniform value of the member's nodes)")
	fs.StringVar(&o.zone, "zone", "", "topology.kubernetes.io/zone of the virtual node (default: uniform value of the member's nodes)")
	fs.StringVar(&o.providerName, "provider", "", "value of the flotilla.io/provider label")
	fs.Float32Var(&o.hostQPS, "host-qps", 500, "QPS of the host client; client-go's default of 5 would cap forwarding at a few pods per second")
	fs.IntVar(&o.hostBurst, "host-burst", 1000, "burst of the host client")
	fs.Float32Var(&o.memberQPS, "member-qps", 500, "QPS of the member client")
	fs.IntVar(&o.memberBurst, "member-burst", 1000, "burst of the member client")
	fs.IntVar(&o.podWorkers, "pod-sync-workers", 32, "workers that forward pod changes to the member, shared equally by the virtual clusters (each gets at least 2)")
	fs.IntVar(&o.statusWorkers, "status-sync-workers", 16, "workers that push member pod status to the host, shared equally by the virtual clusters (each gets at least 2)")
	fs.DurationVar(&o.healthInterval, "member-health-interval", 5*time.Second, "how often the member apiserver's /readyz is checked")
	fs.IntVar(&o.healthFailures, "member-failure-threshold", 2, "failed health checks in a row after which the virtual node turns NotReady (grace period = interval x threshold)")
	fs.DurationVar(&o.kubeletAPIProbeInterval, "kubelet-api-probe-interval", 30*time.Second, "how often each virtual node's kubelet endpoint is probed through the host apiserver (nodes/<node>/proxy/healthz), as kubectl logs and exec reach it; --member-failure-threshold failures in a row set the node's KubeletAPIUnreachable condition; 0 disables the probe")
	fs.DurationVar(&o.syncTimeout, "member-sync-timeout", 30*time.Second, "how long to wait for the member's caches before registering the node anyway (NotReady)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.profilingAddress, "profiling-address", "", "loopback host:port serving net/http/pprof (e.g. 127.0.0.1:6060); empty disables profiling")
	fs.StringVar(&o.metricsAddress, "metrics-bind-address", "0", "host:port serving Prometheus metrics at /metrics (e.g. :8080); 0 disables them")
	fs.StringVar(&o.tracingEndpoint, "tracing-endpoint", "", "OTLP/gRPC collector receiving traces, as http://host:port (plaintext) or https://host:port; empty: the OTEL_EXPORTER_OTLP_ENDPOINT variable, and without it no tracing")
	fs.Float64Var(&o.tracingSampling, "tracing-sampling-ratio", 0.1, "fraction of traces recorded when tracing (0 to 1); a forwarded pod's spans are kept or dropped together")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case o.clusterName == "":
		return nil, errors.New("--cluster-name is required")
	case o.memberKubeconfig == "" && o.hostKubeconfig == "":
		// Both in-cluster would make the cluster flotilla-node runs in a
		// member of itself.
		return nil, errors.New("--member-kubeconfig or --host-kubeconfig is required: flotilla-node runs either in the host (push mode, given --member-kubeconfig) or in the member (pull mode, given --host-kubeconfig)")
	case o.mode != "" && o.mode != "push" && o.mode != "pull":
		return nil, fmt.Errorf("--mode %q: want push or pull", o.mode)
	case (o.tlsCertFile == "") != (o.tlsKeyFile == ""):
		return nil, errors.New("--tls-cert-file and --tls-private-key-file must be given together")
	case o.profilingAddress != "" && !isLoopbackAddress(o.profilingAddress):
		return nil, fmt.Errorf("--profiling-address %q: want a loopback host:port; profiles expose memory contents", o.profilingAddress)
	}
	if o.mode == "" {
		o.mode = "push"
		if o.memberKubeconfig == "" {
			o.mode = "pull"
		}
	}
	return o, nil
}

func setupLogging(o *options) error {
	logger, err := logging.New(o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	entry := logrus.NewEntry(logger).WithField("cluster", o.clusterName)
	log.L = logging.QuietConflicts(logruslogger.FromLogrus(entry))
	// klog (client-go, and the apiserver libraries behind the kubelet
	// endpoint's auth) logs through the same logger.
	klog.SetLogger(logging.Logr(entry))
	return nil
}

func run() error {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	if err := setupLogging(o); err != nil {
		return err
	}
	setMemoryLimit()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	flushTraces, err := startDiagnostics(ctx, o)
	if err != nil {
		return err
	}
	defer flushTraces()
	m, err := newMetrics(o)
	if err != nil {
		return err
	}
	c, err := newClients(ctx, o, m)
	if err != nil {
		return err
	}
	virtualClusters, err := loadVirtualClusters(o)
	if err != nil {
		return err
	}
	if o.remove {
		return remove(ctx, c, virtualClusters)
	}
	if err := checkActAsNodes(ctx, c.host, nodeNames(virtualClusters)); err != nil {
		return err
	}
	serving, err := servingCert(o, c.nodeIP)
	if err != nil {
		return err
	}
	if m.reg != nil {
		stop := serveMetrics(ctx, o.metricsAddress, m.reg)
		defer stop()
	}
	return runNodes(ctx, o, c, nodeConfig(ctx, o, c, m, virtualClusters, serving))
}

// setMemoryLimit gives the Go runtime a soft memory limit below the
// container's, when it has one.
func setMemoryLimit() {
	if limit, err := memlimit.FromCgroup(); err != nil {
		log.L.WithError(err).Warn("no soft memory limit for the Go runtime")
	} else if limit > 0 {
		log.L.WithField("bytes", limit).Info("Go runtime memory limit set below the container's")
	}
}

// startDiagnostics serves profiles and exports traces when asked to, and
// returns what sends the last spans on the way out.
func startDiagnostics(ctx context.Context, o *options) (flushTraces func(), err error) {
	if o.profilingAddress != "" {
		go serveProfiling(ctx, o.profilingAddress)
	}
	shutdownTracing, err := startTracing(ctx, o)
	if err != nil {
		return nil, err
	}
	return func() {
		// The context is done by now; give the last spans a moment.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(ctx)
	}, nil
}

// clients are flotilla-node's connections to the host and its member, and
// what it learns of them before it starts.
type clients struct {
	hostConfig, memberConfig *rest.Config
	host, member             kube.Interface
	memberMetrics            metricsclient.Interface
	// installation identifies the host on every member object.
	installation string
	// nodeIP is where the host apiserver reaches the kubelet endpoints.
	nodeIP string
	// hostMultiCluster and memberMultiCluster are the Multi-Cluster
	// Services API's clients.
	hostMultiCluster, memberMultiCluster mcsclient.Interface
}

// newClients connects to the host and the member (counting their requests
// when metrics are served) and settles the installation and node address.
func newClients(ctx context.Context, o *options, m metrics) (*clients, error) {
	c := &clients{}
	var err error
	if c.hostConfig, err = kubeconfig.Load("host", o.hostKubeconfig, true, o.hostQPS, o.hostBurst); err != nil {
		return nil, err
	}
	if c.memberConfig, err = kubeconfig.Load("member", o.memberKubeconfig, true, o.memberQPS, o.memberBurst); err != nil {
		return nil, err
	}
	if m.reg != nil {
		telemetry.CountAPIErrors(c.memberConfig, m.memberErrors)
		telemetry.CountAPIRequests(c.hostConfig, m.requests, "host")
		telemetry.CountAPIRequests(c.memberConfig, m.requests, "member")
	}
	shareRateLimit(c.hostConfig)
	if c.host, err = kube.NewForConfig(builtInTypes(c.hostConfig)); err != nil {
		return nil, fmt.Errorf("host client: %w", err)
	}
	if c.member, err = kube.NewForConfig(builtInTypes(c.memberConfig)); err != nil {
		return nil, fmt.Errorf("member client: %w", err)
	}
	if c.memberMetrics, err = metricsclient.NewForConfig(c.memberConfig); err != nil {
		return nil, fmt.Errorf("member metrics client: %w", err)
	}
	if o.multiClusterServices {
		if c.hostMultiCluster, err = mcsclient.NewForConfig(c.hostConfig); err != nil {
			return nil, fmt.Errorf("host multi-cluster services client: %w", err)
		}
		if c.memberMultiCluster, err = mcsclient.NewForConfig(c.memberConfig); err != nil {
			return nil, fmt.Errorf("member multi-cluster services client: %w", err)
		}
	}
	if c.installation = o.installation; c.installation == "" {
		if c.installation, err = hostIdentity(ctx, c.host); err != nil {
			return nil, err
		}
	}
	if c.nodeIP = o.nodeIP; c.nodeIP == "" {
		if c.nodeIP, err = firstNonLoopbackIP(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// remove takes the member's virtual nodes out of the fleet (--remove).
func remove(ctx context.Context, c *clients, virtualClusters []v1alpha1.VirtualCluster) error {
	names := nodeNames(virtualClusters)
	if err := checkActAsNodes(ctx, c.host, names); err != nil {
		return err
	}
	return flotillanode.Remove(ctx, flotillanode.RemoveConfig{HostClient: c.host, NodeClient: nodeClients(c.hostConfig), MemberClient: c.member,
		Installation: c.installation, Nodes: names})
}

// nodeConfig is what the virtual nodes run with.
func nodeConfig(ctx context.Context, o *options, c *clients, m metrics, virtualClusters []v1alpha1.VirtualCluster, serving tls.Certificate) flotillanode.Config {
	return flotillanode.Config{
		HostClient:              c.host,
		NodeClient:              nodeClients(c.hostConfig),
		HostConfig:              c.hostConfig,
		MemberClient:            c.member,
		MemberConfig:            c.memberConfig,
		HostMultiCluster:        c.hostMultiCluster,
		MemberMultiCluster:      c.memberMultiCluster,
		Installation:            c.installation,
		Member:                  o.clusterName,
		Mode:                    o.mode,
		VirtualClusters:         virtualClusters,
		NodeIP:                  c.nodeIP,
		ServingCert:             serving,
		Auth:                    func(nodeName string) (kubeletauth.Auth, error) { return kubeletAuth(c.host, o, nodeName) },
		Kubelet:                 kubelet(c.installation, c.memberMetrics),
		PodWorkers:              o.podWorkers,
		StatusWorkers:           o.statusWorkers,
		HealthInterval:          o.healthInterval,
		FailureThreshold:        o.healthFailures,
		KubeletAPIProbeInterval: o.kubeletAPIProbeInterval,
		SyncTimeout:             o.syncTimeout,
		Metrics:                 m.forwarding,
		Registerer:              registerer(m.reg),
	}
}

// runNodes runs the virtual nodes until ctx ends; with --leader-elect only
// while this process holds the member's leader Lease.
func runNodes(ctx context.Context, o *options, c *clients, cfg flotillanode.Config) error {
	if o.leaderElect {
		id, _ := os.Hostname()
		return flotillanode.RunAsLeader(ctx, flotillanode.LeaderConfig{
			Client: c.host, Namespace: o.leaderNamespace, Name: wellknown.LeaderLeaseName(o.clusterName),
			Identity: id + "_" + rand.String(8), LeaseDuration: o.leaseDuration,
		}, func(ctx context.Context) error { return flotillanode.Run(ctx, cfg) })
	}
	return flotillanode.Run(ctx, cfg)
}

// kubelet returns what serves a virtual node's kubelet API: its provider for
// logs, exec, attach and port-forward, and stats and resource metrics from
// the member's metrics.k8s.io, never from its kubelets (see
// stats.ResourceMetrics).
func kubelet(installation string, memberMetrics metricsclient.Interface) func(v1alpha1.VirtualCluster, *provider.Provider) (provider.KubeletAPI, error) {
	return func(vc v1alpha1.VirtualCluster, p *provider.Provider) (provider.KubeletAPI, error) {
		metrics, err := stats.NewResourceMetrics(stats.ResourceMetricsConfig{
			NodeName:     vc.Name,
			Installation: installation,
			Metrics:      stats.MetricsAPI{Client: memberMetrics},
			MemberPods:   p.MemberPods(),
			NodeSelector: nodeconfig.Selector(vc),
		})
		if err != nil {
			return nil, fmt.Errorf("stats and resource metrics: %w", err)
		}
		return provider.Kubelet{Provider: p, ResourceMetrics: metrics}, nil
	}
}

// startTracing exports spans over OTLP when an endpoint is configured and
// makes virtual-kubelet's own spans (pod controller, queues, node status)
// OpenTelemetry spans too, so that they and the provider's land in one trace.
func startTracing(ctx context.Context, o *options) (func(context.Context) error, error) {
	cfg := telemetry.TracingConfig{
		Service:       "flotilla-node",
		Endpoint:      o.tracingEndpoint,
		SamplingRatio: o.tracingSampling,
		Attributes:    []attribute.KeyValue{attribute.String("flotilla.cluster", o.clusterName)},
	}
	shutdown, err := telemetry.StartTracing(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if cfg.Enabled() {
		trace.T = vkotel.Adapter{}
		log.G(ctx).WithField("sampling", o.tracingSampling).Info("exporting traces over OTLP")
	}
	return shutdown, nil
}

// metrics are what flotilla-node measures; all nil when metrics are not
// served.
type metrics struct {
	// reg holds flotilla's own metrics.
	reg          *prometheus.Registry
	forwarding   *provider.Metrics
	memberErrors *prometheus.CounterVec // of the member's API
	requests     *prometheus.CounterVec // to both apiservers
}

// newMetrics returns, when metrics are served, the registry of flotilla's
// own metrics, the forwarding metrics, the member API error counter and the
// API request counter.
func newMetrics(o *options) (metrics, error) {
	if o.metricsAddress == "0" || o.metricsAddress == "" {
		return metrics{}, nil
	}
	reg := prometheus.NewRegistry()
	m, err := provider.NewMetrics(reg, nil)
	if err != nil {
		return metrics{}, err
	}
	errs := telemetry.NewAPIErrors("flotilla_node_member_api_errors_total",
		"Failed requests to the member apiserver by verb, resource and HTTP code (transport: no response).")
	requests := telemetry.NewAPIRequests("flotilla_node_api_requests_total",
		"Requests to the host and member apiservers by verb, resource and HTTP code (transport: no response).")
	for _, c := range []prometheus.Collector{errs, requests} {
		if err := reg.Register(c); err != nil {
			return metrics{}, err
		}
	}
	return metrics{reg: reg, forwarding: m, memberErrors: errs, requests: requests}, nil
}

// serveMetrics serves flotilla's metrics with those the Kubernetes
// libraries keep in their own registry (work queues, Go runtime, process)
// and returns a function that stops the server and waits for it. The stop
// does not wait for ctx: the virtual nodes may end with an error while no
// signal has come, and the process must then exit rather than wait for one.
// A failure to listen stops nothing else; it is logged.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g := prometheus.Gatherers{reg, legacyregistry.DefaultGatherer}
		log.G(ctx).WithField("address", addr).Info("serving metrics")
		if err := telemetry.ServeMetrics(ctx, addr, g); err != nil {
			log.G(ctx).WithError(err).WithField("address", addr).Error("metrics server failed")
		}
	}()
	return func() { cancel(); <-done }
}

func registerer(reg *prometheus.Registry) prometheus.Registerer {
	if reg == nil {
		return nil
	}
	return reg
}

// loadVirtualClusters returns the virtual nodes to run: those of --config,
// or the whole member as one, described by the node flags (and by a
// --config that lists no virtual clusters, only placement).
func loadVirtualClusters(o *options) ([]v1alpha1.VirtualCluster, error) {
	cfg, whole, err := nodeconfig.Load(o.configFile, o.clusterName, int32(o.listenPort))
	if err != nil {
		return nil, err
	}
	if !whole {
		if len(o.nodeLabels) > 0 || o.region != "" || o.zone != "" || o.providerName != "" {
			return nil, errors.New("--node-labels, --region, --zone and --provider describe a whole-cluster node; with virtualClusters in --config set them per virtual cluster")
		}
		return cfg.VirtualClusters, nil
	}
	vc := &cfg.VirtualClusters[0]
	vc.Labels, vc.Region, vc.Zone, vc.Provider = o.nodeLabels, o.region, o.zone, o.providerName
	return cfg.VirtualClusters, nil
}

// servingCert is the kubelet endpoints' certificate: the given one, or a
// self-signed one for the node address (which the host apiserver only
// accepts when it does not verify kubelet certificates).
func servingCert(o *options, nodeIP string) (tls.Certificate, error) {
	if o.tlsCertFile != "" {
		pair, err := tls.LoadX509KeyPair(o.tlsCertFile, o.tlsKeyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("load serving certificate %s: %w", o.tlsCertFile, err)
		}
		return pair, nil
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(o.clusterName, []net.IP{net.ParseIP(nodeIP)}, nil)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate serving certificate: %w", err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// hostIdentity is the UID of the host's kube-system namespace. It retries
// for a while: a role bound at the same time as flotilla-node starts (one
// Helm release) takes a moment to reach the apiserver's authorizer.
func hostIdentity(ctx context.Context, host kube.Interface) (string, error) {
	var uid string
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ns, err := host.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		uid = string(ns.UID)
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = last
		}
		return "", fmt.Errorf("identify the host cluster by its kube-system namespace (or set --installation-id): %w", err)
	}
	return uid, nil
}

// builtInTypes is cfg for the clients of Kubernetes' own types, which all
// speak protobuf: the generated clients default to it, but not the
// hand-written calls beside them (events among them, one or more per
// forwarded pod), which would otherwise send and read JSON.
func builtInTypes(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// kubeletAuth authenticates callers of the kubelet endpoint by client
// certificate (when a CA is given) or bearer token (TokenReview), and
// authorizes them with SubjectAccessReview on nodes/proxy, nodes/log, ...
func kubeletAuth(host kube.Interface, o *options, nodeName string) (kubeletauth.Auth, error) {
	opts := kubeletauth.Options{Anonymous: o.anonymousAuth}
	if o.clientCAFile != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", o.clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		opts.ClientCA = ca
	}
	auth, err := kubeletauth.Webhook(kubeletauth.Clients{Authentication: host.AuthenticationV1(), Authorization: host.AuthorizationV1()}, nodeName, opts)
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

// nodeNames are the names of the virtual nodes.
func nodeNames(virtualClusters []v1alpha1.VirtualCluster) []string {
	names := make([]string, 0, len(virtualClusters))
	for _, vc := range virtualClusters {
		names = append(names, vc.Name)
	}
	return names
}

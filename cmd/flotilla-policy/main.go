// Command flotilla-policy runs the policy API in the host cluster: it
// places the pods of workload templates that PropagationPolicies select,
// records each policy's placements in its status, validates policies (see
// docs/policies.md), and brokers the Multi-Cluster Services API for the
// fleet (package servicebroker).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/config/rbac"
	"flotilla.io/flotilla/internal/logging"
	"flotilla.io/flotilla/internal/telemetry"
	"flotilla.io/flotilla/internal/webhookcert"
	"flotilla.io/flotilla/policyctl"
	"flotilla.io/flotilla/servicebroker"
)

type options struct {
	kubeconfig      string
	webhookHost     string
	webhookPort     int
	certDir         string
	certSecret      string
	service         string
	certIPs         []net.IP
	mutatingNames   []string
	validatingNames []string
	caValidity      time.Duration
	certValidity    time.Duration
	leaderElect     bool
	leaderNamespace string
	metricsAddress  string
	probeAddress    string
	logLevel        string
	logFormat       string
	rebalance       time.Duration
	refusalCooldown time.Duration
	tracingEndpoint string
	tracingSampling float64
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-policy:", err)
		os.Exit(1)
	}
}

func parseFlags() (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("flotilla-policy", pflag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the host cluster; empty means the in-cluster configuration")
	fs.StringVar(&o.webhookHost, "webhook-host", "", "address the webhook server listens on (default: all)")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the webhook server")
	fs.StringVar(&o.certDir, "cert-dir", "", "directory holding the webhook server's tls.crt and tls.key, kept by someone else (cert-manager); set this or --webhook-cert-secret")
	fs.StringVar(&o.certSecret, "webhook-cert-secret", "", "<namespace>/<name> of a Secret where flotilla-policy keeps a self-signed CA and the webhook serving certificate itself, shared by its replicas and renewed before expiry; set this or --cert-dir")
	fs.StringVar(&o.service, "webhook-service", "", "<namespace>/<name> of the webhooks' Service, whose DNS names the self-managed serving certificate carries")
	fs.IPSliceVar(&o.certIPs, "webhook-cert-ips", nil, "IP addresses the self-managed serving certificate carries, for webhooks called by URL")
	fs.StringSliceVar(&o.mutatingNames, "mutating-webhook-configuration", nil, "MutatingWebhookConfigurations whose webhooks get the self-managed CA bundle")
	fs.StringSliceVar(&o.validatingNames, "validating-webhook-configuration", nil, "ValidatingWebhookConfigurations whose webhooks get the self-managed CA bundle")
	fs.DurationVar(&o.caValidity, "webhook-ca-validity", 3*365*24*time.Hour, "lifetime of a self-managed CA; a new one joins the CA bundle at 2/3 of it and signs from 5/6")
	fs.DurationVar(&o.certValidity, "webhook-cert-validity", 90*24*time.Hour, "lifetime of a self-managed serving certificate; it is renewed at 2/3 of it")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "run the reconcilers only in the replica holding the leader Lease; every replica serves the webhooks")
	fs.StringVar(&o.leaderNamespace, "leader-election-namespace", "", "namespace of the leader Lease (default: the pod's own)")
	fs.StringVar(&o.metricsAddress, "metrics-bind-address", "0", "address of the /metrics endpoint; 0 disables it")
	fs.StringVar(&o.probeAddress, "health-probe-bind-address", "0", "address of /healthz and /readyz; 0 disables them")
	fs.DurationVar(&o.refusalCooldown, "refusal-cooldown", 2*time.Minute, "how long a cluster whose member handed back a pod it could not schedule gets no pod of the same controller")
	fs.DurationVar(&o.rebalance, "rebalance-interval", 10*time.Second, "least time between two evictions that move one workload's replicas toward its placement (after a policy change or a cluster loss); PodDisruptionBudgets are honoured")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.tracingEndpoint, "tracing-endpoint", "", "OTLP/gRPC collector receiving traces of reconciles and admissions, as http://host:port (plaintext) or https://host:port; empty: the OTEL_EXPORTER_OTLP_ENDPOINT variable, and without it no tracing")
	fs.Float64Var(&o.tracingSampling, "tracing-sampling-ratio", 0.1, "fraction of traces recorded when tracing (0 to 1)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return nil, err
	}
	if (o.certDir == "") == (o.certSecret == "") {
		return nil, errors.New("set one of --cert-dir and --webhook-cert-secret")
	}
	if o.certSecret != "" && o.service == "" && len(o.certIPs) == 0 {
		return nil, errors.New("--webhook-cert-secret needs --webhook-service or --webhook-cert-ips to name the certificate's subject")
	}
	return o, nil
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	log, err := setupLogging(o)
	if err != nil {
		return err
	}
	mgr, rotator, err := newManager(o, log)
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	flushTraces, err := startTracing(ctx, o)
	if err != nil {
		return err
	}
	defer flushTraces()
	if err := policyctl.Setup(ctx, mgr, log, policyctl.Options{RebalanceInterval: o.rebalance, RefusalCooldown: o.refusalCooldown}); err != nil {
		return err
	}
	if err := servicebroker.Setup(ctx, mgr, log); err != nil {
		return err
	}
	if rotator != nil {
		if err := mgr.Add(rotator); err != nil {
			return err
		}
	}
	if err := addProbes(mgr, o, rotator); err != nil {
		return err
	}
	go logElected(ctx, mgr, o, log)
	log.Info("flotilla-policy starting")
	return mgr.Start(ctx)
}

// setupLogging points controller-runtime's and klog's logs at one logrus
// logger, and returns it.
func setupLogging(o *options) (*logrus.Entry, error) {
	logger, err := logging.New(o.logLevel, o.logFormat)
	if err != nil {
		return nil, err
	}
	log := logrus.NewEntry(logger)
	ctrl.SetLogger(logging.Logr(log))
	klog.SetLogger(logging.Logr(log))
	return log, nil
}

// newManager is the controller manager of the host cluster, its webhook
// server serving the certificates of rotator when flotilla-policy keeps
// them itself (--webhook-cert-secret); rotator is nil otherwise.
func newManager(o *options, log logrus.FieldLogger) (mgr ctrl.Manager, rotator *webhookcert.Rotator, err error) {
	cfg, err := hostConfig(o)
	if err != nil {
		return nil, nil, err
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, nil, err
	}
	var tlsOpts []func(*tls.Config)
	if o.certSecret != "" {
		if rotator, err = newRotator(cfg, o, log); err != nil {
			return nil, nil, err
		}
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.GetCertificate = rotator.GetCertificate })
	}
	mgr, err = ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        rbac.PolicyLeaseName,
		LeaderElectionNamespace: o.leaderNamespace,
		// A replica stopping (a rolling update) hands the Lease over at
		// once instead of making the next leader wait for it to expire.
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddress},
		HealthProbeBindAddress:        o.probeAddress,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: o.webhookHost, Port: o.webhookPort, CertDir: o.certDir, TLSOpts: tlsOpts,
		}),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create manager: %w", err)
	}
	return mgr, rotator, nil
}

// hostConfig is the host cluster's client configuration, with room for the
// bursts of a policy change.
func hostConfig(o *options) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("host kubeconfig %q: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// newScheme knows Kubernetes' own types, the policy API and the
// Multi-Cluster Services API.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := policyv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := mcsv1beta1.Install(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// startTracing exports the spans of reconciles and admissions when an
// endpoint is configured, and returns what sends the last ones on the way
// out.
func startTracing(ctx context.Context, o *options) (flushTraces func(), err error) {
	shutdownTracing, err := telemetry.StartTracing(ctx, telemetry.TracingConfig{
		Service: "flotilla-policy", Endpoint: o.tracingEndpoint, SamplingRatio: o.tracingSampling,
	})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(ctx)
	}, nil
}

// addProbes serves /healthz and /readyz when asked to: ready once the
// webhook server has started and, when flotilla-policy keeps them, its
// certificates are in place.
func addProbes(mgr ctrl.Manager, o *options, rotator *webhookcert.Rotator) error {
	if o.probeAddress == "0" {
		return nil
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	if rotator != nil {
		if err := mgr.AddReadyzCheck("webhook-certificate", rotator.ReadyCheck); err != nil {
			return err
		}
	}
	return nil
}

// logElected says when this replica becomes the one that reconciles.
func logElected(ctx context.Context, mgr ctrl.Manager, o *options, log logrus.FieldLogger) {
	select {
	case <-mgr.Elected():
		if o.leaderElect {
			log.Info("elected leader: reconciling policies")
		}
	case <-ctx.Done():
	}
}

// newRotator keeps the webhook certificates in the Secret --webhook-cert-secret
// names, for the names of --webhook-service and --webhook-cert-ips.
func newRotator(cfg *rest.Config, o *options, log logrus.FieldLogger) (*webhookcert.Rotator, error) {
	secret, err := namespacedName("--webhook-cert-secret", o.certSecret)
	if err != nil {
		return nil, err
	}
	var dns []string
	if o.service != "" {
		svc, err := namespacedName("--webhook-service", o.service)
		if err != nil {
			return nil, err
		}
		// What the apiserver asks for a service reference, and the usual
		// spellings of the same name.
		base := svc.Name + "." + svc.Namespace
		dns = []string{base + ".svc", svc.Name, base, base + ".svc.cluster.local"}
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return webhookcert.New(webhookcert.Config{
		Client: client,
		Secret: secret,
		Want: webhookcert.Want{
			DNSNames: dns, IPs: o.certIPs,
			CAValidity: o.caValidity, ServingValidity: o.certValidity,
		},
		MutatingWebhookConfigurations:   o.mutatingNames,
		ValidatingWebhookConfigurations: o.validatingNames,
		Log:                             log.WithField("component", "webhook-certificates"),
	})
}

func namespacedName(flag, v string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("%s: want <namespace>/<name>, got %q", flag, v)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

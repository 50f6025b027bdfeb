// Command flotilla-policy runs the policy API in the host cluster: it
// places the pods of workload templates that PropagationPolicies select,
// records each policy's placements in its status, and validates policies
// (see docs/policies.md).
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/logging"
	"flotilla.io/flotilla/policyctl"
)

type options struct {
	kubeconfig      string
	webhookHost     string
	webhookPort     int
	certDir         string
	leaderElect     bool
	leaderNamespace string
	metricsAddress  string
	probeAddress    string
	logLevel        string
	logFormat       string
	rebalance       time.Duration
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
	fs.StringVar(&o.certDir, "cert-dir", "", "directory holding the webhook server's tls.crt and tls.key (required)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "run the reconcilers only in the replica holding the leader Lease; every replica serves the webhooks")
	fs.StringVar(&o.leaderNamespace, "leader-election-namespace", "", "namespace of the leader Lease (default: the pod's own)")
	fs.StringVar(&o.metricsAddress, "metrics-bind-address", "0", "address of the /metrics endpoint; 0 disables it")
	fs.StringVar(&o.probeAddress, "health-probe-bind-address", "0", "address of /healthz and /readyz; 0 disables them")
	fs.DurationVar(&o.rebalance, "rebalance-interval", 10*time.Second, "least time between two evictions that move one workload's replicas toward its placement (after a policy change or a cluster loss); PodDisruptionBudgets are honoured")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return nil, err
	}
	if o.certDir == "" {
		return nil, errors.New("--cert-dir is required")
	}
	return o, nil
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
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
	log := logrus.NewEntry(logger)
	ctrl.SetLogger(logging.Logr(log))

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("host kubeconfig %q: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := policyv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "flotilla-policy",
		LeaderElectionNamespace: o.leaderNamespace,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddress},
		HealthProbeBindAddress:  o.probeAddress,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: o.webhookHost, Port: o.webhookPort, CertDir: o.certDir,
		}),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := policyctl.Setup(ctx, mgr, log, policyctl.Options{RebalanceInterval: o.rebalance}); err != nil {
		return err
	}
	if o.probeAddress != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	}
	log.Info("flotilla-policy starting")
	return mgr.Start(ctx)
}

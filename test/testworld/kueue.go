package testworld

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// Kueue (sigs.k8s.io/kueue) runs as a plain process of the world beside the
// host apiserver, as its administrator, the way its Deployment runs in a
// cluster, with these differences that a world without Services and
// container images needs:
//   - its CRDs and webhook configurations are read from its module's own
//     config (Bin.KueueModule), the webhooks registered by URL on loopback
//     instead of through a Service, and only those for Kueue's own API and
//     Jobs (the one integration enabled);
//   - its serving certificate is issued by the host CA, so Kueue's internal
//     certificate management is off;
//   - Kueue then reads its metrics certificate from a fixed path under /etc,
//     which it gets in a mount namespace of its own: nothing is written
//     outside the world's directory;
//   - the visibility API, an aggregated apiserver that writes certificates
//     to a fixed path of its own, is off.

// Paths in Kueue's module and in its process's view of the file system.
const (
	kueueCRDDir      = "config/components/crd/bases"
	kueueWebhookFile = "config/components/webhook/manifests.yaml"
	// kueueMetricsCertDir is where Kueue reads its metrics serving pair
	// when it does not manage certificates itself.
	kueueMetricsCertDir = "/etc/kueue/metrics/certs"
	// KueueNamespace is Kueue's own namespace.
	KueueNamespace = "kueue-system"
	// kueueWebhookPrefix names the webhook configurations registered for
	// Kueue, so that they are told apart from flotilla's.
	kueueWebhookPrefix = "kueue-"
)

// Kueue is Kueue's controller manager running against a world's host.
type Kueue struct {
	// Process is the running controller manager.
	Process *Process
	// WebhookPort is the loopback port its webhooks listen on.
	WebhookPort int
}

// StartKueue installs Kueue's CRDs in the host, starts its controller
// manager with the Job integration, registers its webhooks and waits until
// it is ready. The process is an extra process of the world (log in
// Dir/kueue.log), stopped by Stop.
func (w *World) StartKueue(ctx context.Context) (*Kueue, error) {
	if w.bin.Kueue == "" || w.bin.KueueModule == "" {
		return nil, fmt.Errorf("start kueue: no binary; FLOTILLA_KUEUE=1 %s builds it", buildScript)
	}
	host := w.host
	if err := installKueueCRDs(ctx, host, filepath.Join(w.bin.KueueModule, kueueCRDDir)); err != nil {
		return nil, err
	}
	if _, err := host.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("start kueue: namespace: %w", err)
	}
	dir := filepath.Join(w.dir, "kueue")
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("start kueue: %w", err)
	}
	certFile, keyFile, err := host.IssueServingCert("kueue-webhook", []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	for src, name := range map[string]string{certFile: "tls.crt", keyFile: "tls.key"} {
		if err := copyFile(src, filepath.Join(certDir, name)); err != nil {
			return nil, fmt.Errorf("start kueue: %w", err)
		}
	}
	ports, err := w.ports.allocateN(3)
	if err != nil {
		return nil, fmt.Errorf("start kueue: %w", err)
	}
	webhookPort, probePort, metricsPort := ports[0], ports[1], ports[2]
	configFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configFile, []byte(kueueConfig(webhookPort, probePort, metricsPort, certDir)), 0o600); err != nil {
		return nil, fmt.Errorf("start kueue: %w", err)
	}
	// A mount namespace of its own, where /etc is an empty tmpfs holding
	// only the metrics certificate: Kueue reads nothing else there (it
	// reaches the apiserver by address, with the CA in its kubeconfig).
	script := `set -e
mount -t tmpfs tmpfs /etc
mkdir -p "$1"
cp "$2/tls.crt" "$2/tls.key" "$1/"
shift 2
exec "$@"`
	p, err := w.StartProcess("kueue", "unshare", "--mount", "--propagation=private", "--", "sh", "-c", script, "kueue",
		kueueMetricsCertDir, certDir,
		w.bin.Kueue, "--config="+configFile, "--kubeconfig="+host.KubeconfigPath, "--zap-log-level=2")
	if err != nil {
		return nil, fmt.Errorf("start kueue: %w", err)
	}
	ca, err := os.ReadFile(host.CAFile)
	if err != nil {
		return nil, fmt.Errorf("start kueue: %w", err)
	}
	base := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(webhookPort))
	if err := registerKueueWebhooks(ctx, host, filepath.Join(w.bin.KueueModule, kueueWebhookFile), base, ca); err != nil {
		return nil, err
	}
	ready := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(probePort)) + "/readyz"
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, _ := p.Exited(); exited {
			return false, p.exitError()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		return nil, fmt.Errorf("kueue not ready: %w\n%s", err, p.LogTail(logTailLines))
	}
	return &Kueue{Process: p, WebhookPort: webhookPort}, nil
}

// kueueConfig is Kueue's Configuration: webhooks on loopback with the
// world's certificate, no leader election (one replica), the Job
// integration only, and nothing that needs a Service or a fixed path.
func kueueConfig(webhookPort, probePort, metricsPort int, certDir string) string {
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: 127.0.0.1:%d
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
featureGates:
  VisibilityOnDemand: false
integrations:
  frameworks:
  - batch/job
`, KueueNamespace, probePort, metricsPort, webhookPort, certDir)
}

// installKueueCRDs creates every CRD in dir in the host and waits until they
// are established.
func installKueueCRDs(ctx context.Context, host *Cluster, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("kueue CRDs: none in %s (%v)", dir, err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("kueue CRDs: %w", err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return fmt.Errorf("kueue CRD %s: %w", filepath.Base(f), err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue // kustomization.yaml and the like
		}
		crds = append(crds, crd)
	}
	return host.InstallCRDs(ctx, crds)
}

// InstallCRDs creates crds in the cluster (those that exist are kept) and
// waits until every one is established, so that its objects can be made.
func (c *Cluster) InstallCRDs(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) error {
	client, err := apiextensionsclient.NewForConfig(c.RESTConfig())
	if err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	for _, crd := range crds {
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}

// registerKueueWebhooks creates Kueue's webhook configurations from file
// (its module's manifests), keeping the webhooks of Kueue's own API and of
// Jobs — those of integrations that are off would fail every request, their
// paths not being served — each calling base plus its Service path, trusting
// ca.
func registerKueueWebhooks(ctx context.Context, host *Cluster, file, base string, ca []byte) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("kueue webhooks: %w", err)
	}
	ar := host.Client().AdmissionregistrationV1()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("kueue webhooks %s: %w", file, err)
		}
		raw, err := yaml.Marshal(doc)
		if err != nil {
			return fmt.Errorf("kueue webhooks %s: %w", file, err)
		}
		switch doc["kind"] {
		case "MutatingWebhookConfiguration":
			cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal(raw, cfg); err != nil {
				return fmt.Errorf("kueue webhooks %s: %w", file, err)
			}
			cfg.Name, cfg.Namespace = kueueWebhookPrefix+cfg.Name, ""
			var keep []admissionregistrationv1.MutatingWebhook
			for _, wh := range cfg.Webhooks {
				if kueueServes(wh.Rules) {
					wh.ClientConfig = byURL(wh.ClientConfig, base, ca)
					keep = append(keep, wh)
				}
			}
			cfg.Webhooks = keep
			if _, err := ar.MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("register kueue webhooks %s: %w", cfg.Name, err)
			}
		case "ValidatingWebhookConfiguration":
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal(raw, cfg); err != nil {
				return fmt.Errorf("kueue webhooks %s: %w", file, err)
			}
			cfg.Name, cfg.Namespace = kueueWebhookPrefix+cfg.Name, ""
			var keep []admissionregistrationv1.ValidatingWebhook
			for _, wh := range cfg.Webhooks {
				if kueueServes(wh.Rules) {
					wh.ClientConfig = byURL(wh.ClientConfig, base, ca)
					keep = append(keep, wh)
				}
			}
			cfg.Webhooks = keep
			if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("register kueue webhooks %s: %w", cfg.Name, err)
			}
		}
	}
}

// kueueServes reports whether a webhook's rules are for Kueue's own API or
// for Jobs, the webhooks the world's Kueue serves.
func kueueServes(rules []admissionregistrationv1.RuleWithOperations) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, "kueue.x-k8s.io") {
			return true
		}
		if slices.Contains(r.APIGroups, "batch") && slices.Contains(r.Resources, "jobs") {
			return true
		}
	}
	return false
}

// byURL points a webhook's client configuration, written for Kueue's
// Service, at base plus the Service's path.
func byURL(c admissionregistrationv1.WebhookClientConfig, base string, ca []byte) admissionregistrationv1.WebhookClientConfig {
	path := ""
	if c.Service != nil && c.Service.Path != nil {
		path = *c.Service.Path
	}
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + path), CABundle: ca}
}

// copyFile copies src to dst, readable by its owner only.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}

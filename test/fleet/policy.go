package fleet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/config/rbac"
	"flotilla.io/flotilla/policyctl"
	"flotilla.io/flotilla/test/testworld"
)

// PolicyIdentity is the user flotilla-policy acts as in the host.
const PolicyIdentity = "flotilla-policy"

// WebhookName is the name of flotilla-policy's webhook configurations.
const WebhookName = rbac.PolicyWebhookConfigurationName

// BuildPolicy compiles cmd/flotilla-policy into dir and returns the
// binary's path.
func BuildPolicy(ctx context.Context, dir string) (string, error) {
	return build(ctx, "flotilla-policy", filepath.Join(dir, "flotilla-policy"))
}

// StartPolicy installs the policy CRDs in the host, grants flotilla-policy
// exactly its ClusterRole, starts it with a serving certificate from the
// host CA and registers its webhooks as the Helm chart does: the pod
// webhook with failurePolicy Ignore, the policy validation with Fail.
// Called again after the process stopped, it restarts flotilla-policy on
// the same port.
func (f *Fleet) StartPolicy(ctx context.Context, binary string, extraArgs ...string) (*testworld.Process, error) {
	host := f.World.Host()
	if err := grantPolicy(ctx, host, ""); err != nil {
		return nil, err
	}
	certFile, keyFile, err := host.IssueServingCert("flotilla-policy", []net.IP{net.ParseIP(testworld.AdvertiseIP)})
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(f.World.Dir(), "flotilla-policy-certs")
	if err := linkCerts(certDir, certFile, keyFile); err != nil {
		return nil, err
	}
	f.mu.Lock()
	port := f.policyPort
	f.mu.Unlock()
	if port == 0 {
		if port, err = f.World.FreePort(); err != nil {
			return nil, err
		}
	}
	p, err := f.runPolicy(ctx, binary, port, append([]string{"--cert-dir=" + certDir}, extraArgs...)...)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(host.CAFile)
	if err != nil {
		return nil, err
	}
	if err := RegisterPolicyWebhooks(ctx, host, PolicyWebhookURL(port), ca); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.policy, f.policyPort = p, port
	f.mu.Unlock()
	return p, nil
}

// StartPolicyReplica starts one replica of a leader-elected flotilla-policy
// as the Helm chart runs it: --leader-elect with its Lease in namespace,
// and self-managed webhook certificates in the Secret
// rbac.PolicyCertSecretName of namespace, for the world's address (the
// webhooks are called by URL: the test world routes no Services), with the
// CA bundle written into the webhook configurations named WebhookName. Those
// configurations must exist (RegisterPolicyWebhooks with no CA bundle):
// the replica is ready once it has filled them. flotilla-policy gets its
// ClusterRole and its Role in namespace, nothing else. The replica listens
// on port of the world's address; the caller stops it.
func (f *Fleet) StartPolicyReplica(ctx context.Context, binary, namespace string, port int, extraArgs ...string) (*testworld.Process, error) {
	if err := grantPolicy(ctx, f.World.Host(), namespace); err != nil {
		return nil, err
	}
	return f.runPolicy(ctx, binary, port, append([]string{
		"--leader-elect",
		"--leader-election-namespace=" + namespace,
		"--webhook-cert-secret=" + namespace + "/" + rbac.PolicyCertSecretName,
		"--webhook-cert-ips=" + testworld.AdvertiseIP,
		"--mutating-webhook-configuration=" + WebhookName,
		"--validating-webhook-configuration=" + WebhookName,
	}, extraArgs...)...)
}

// PolicyWebhookURL is the base URL of a flotilla-policy listening on port
// of the world's address.
func PolicyWebhookURL(port int) string {
	return "https://" + net.JoinHostPort(testworld.AdvertiseIP, strconv.Itoa(port))
}

// grantPolicy installs the policy CRDs and grants flotilla-policy exactly
// its ClusterRole and, when namespace is set, its Role there.
func grantPolicy(ctx context.Context, host *testworld.Cluster, namespace string) error {
	if err := installCRDs(ctx, host); err != nil {
		return err
	}
	if err := apply(ctx, host.Client(), rbac.PolicyClusterRole()); err != nil {
		return fmt.Errorf("flotilla-policy ClusterRole: %w", err)
	}
	if err := bind(ctx, host.Client(), rbac.PolicyClusterRole().Name, PolicyIdentity); err != nil {
		return fmt.Errorf("flotilla-policy binding: %w", err)
	}
	if namespace == "" {
		return nil
	}
	role := rbac.PolicyRole()
	role.Namespace = namespace
	c := host.Client().RbacV1()
	if _, err := c.Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("flotilla-policy Role: %w", err)
	}
	if _, err := c.RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: PolicyIdentity}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("flotilla-policy RoleBinding: %w", err)
	}
	return nil
}

// runPolicy starts flotilla-policy as PolicyIdentity, its webhook server on
// port of the world's address, and waits until it is ready.
func (f *Fleet) runPolicy(ctx context.Context, binary string, port int, extraArgs ...string) (*testworld.Process, error) {
	kc, err := f.World.Host().UserKubeconfig(PolicyIdentity)
	if err != nil {
		return nil, err
	}
	probe, err := f.World.FreePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + kc,
		"--webhook-host=" + testworld.AdvertiseIP,
		"--webhook-port=" + strconv.Itoa(port),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe),
		"--log-level=debug",
	}, extraArgs...)
	p, err := f.World.StartProcess("flotilla-policy-"+strconv.FormatInt(time.Now().UnixNano(), 36), binary, args...)
	if err != nil {
		return nil, fmt.Errorf("start flotilla-policy: %w", err)
	}
	ready := "http://127.0.0.1:" + strconv.Itoa(probe) + "/readyz"
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("flotilla-policy exited: %v\n%s", err, p.LogTail(30))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("flotilla-policy not ready: %w\n%s", err, p.LogTail(30))
	}
	return p, nil
}

// Policy returns the running flotilla-policy process, nil before
// StartPolicy.
func (f *Fleet) Policy() *testworld.Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policy
}

// linkCerts puts the serving pair where controller-runtime's webhook server
// looks for it.
func linkCerts(dir, certFile, keyFile string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for src, name := range map[string]string{certFile: "tls.crt", keyFile: "tls.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	_, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	return err
}

// RegisterPolicyWebhooks creates flotilla-policy's webhook configurations,
// named WebhookName, calling base (a URL) and trusting ca, as the Helm chart
// registers them: the pod webhook with failurePolicy Ignore, the policy
// validation with Fail. Existing configurations are left as they are.
func RegisterPolicyWebhooks(ctx context.Context, host *testworld.Cluster, base string, ca []byte) error {
	none := admissionregistrationv1.SideEffectClassNone
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: WebhookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "pods.policy.flotilla.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + policyctl.PodWebhookPath), CABundle: ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}}},
		}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: WebhookName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "policies.policy.flotilla.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + policyctl.PolicyWebhookPath), CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"policy.flotilla.io"}, APIVersions: []string{"v1alpha1"},
					Resources: []string{"propagationpolicies", "clusterpropagationpolicies", "overridepolicies", "clusteroverridepolicies"}},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	ar := host.Client().AdmissionregistrationV1()
	if _, err := ar.MutatingWebhookConfigurations().Create(ctx, mutating, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register pod webhook: %w", err)
	}
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, validating, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register policy webhook: %w", err)
	}
	return nil
}

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/config/rbac"
	"flotilla.io/flotilla/policyctl"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
	"flotilla.io/flotilla/test/tools"
)

// policyCRDs are the CRDs of the flotilla-policy chart's crds/.
var policyCRDs = []string{
	"propagationpolicies.policy.flotilla.io", "clusterpropagationpolicies.policy.flotilla.io",
	"overridepolicies.policy.flotilla.io", "clusteroverridepolicies.policy.flotilla.io",
}

// TestHelmInstallFlotillaPolicy installs the flotilla-policy chart into the
// host as an operator would, with its defaults (self-managed webhook
// certificates). It checks that the CRDs are established, the webhook
// configurations are registered as the test world registers them but
// pointing at the release's Service, that the ClusterRole and Role are
// exactly config/rbac's and grant the release's ServiceAccount what they
// should — through the authorizer, and by running the Deployment's
// container as the kubelet would with that ServiceAccount's token: it
// creates its certificate Secret, fills both caBundles and takes the
// leader Lease. The host's nodes never run the image itself. `helm
// uninstall` then removes every object of the release but the CRDs (as Helm
// does with crds/) and the Secret flotilla-policy made at run time.
func TestHelmInstallFlotillaPolicy(t *testing.T) {
	paths, err := tools.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	root, err := testworld.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := policyBinary(t)
	takeOverWebhooks(t)
	ctx, hc := t.Context(), hostClient()
	ns := namespace(t)
	helm := helmCommand(t, paths.Helm, ns)
	const name, fullname = "policy", "policy-flotilla-policy"
	helm("install", name, filepath.Join(root, "charts/flotilla-policy"))

	for _, crd := range policyCRDs {
		eventually(t, propagation, "CRD "+crd+" established", func(ctx context.Context) (bool, string, error) {
			out, err := kubectl(ctx, nil, "get", "crd", crd, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
			return err == nil && out == "True", out, nil
		})
	}

	t.Run("webhooks", func(t *testing.T) {
		svc := &admissionregistrationv1.ServiceReference{Namespace: ns, Name: fullname + "-webhook", Port: ptr.To[int32](443)}
		m, err := hc.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, fleet.WebhookName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Webhooks) != 1 {
			t.Fatalf("%d mutating webhooks, want 1", len(m.Webhooks))
		}
		w := m.Webhooks[0]
		svc.Path = ptr.To(policyctl.PodWebhookPath)
		if diff := cmp.Diff(svc, w.ClientConfig.Service); diff != "" {
			t.Errorf("pod webhook calls (-want +got):\n%s", diff)
		}
		if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.SideEffects != admissionregistrationv1.SideEffectClassNone || *w.TimeoutSeconds != 5 {
			t.Errorf("pod webhook failurePolicy %s sideEffects %s timeout %d, want Ignore None 5", *w.FailurePolicy, *w.SideEffects, *w.TimeoutSeconds)
		}
		wantSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{ns, "kube-system"}}}}
		if diff := cmp.Diff(wantSel, w.NamespaceSelector); diff != "" {
			t.Errorf("pod webhook namespaceSelector (-want +got):\n%s", diff)
		}
		if r := w.Rules; len(r) != 1 || fmt.Sprint(r[0].Operations, r[0].Resources) != "[CREATE] [pods]" {
			t.Errorf("pod webhook rules %+v, want pods CREATE", r)
		}
		v, err := hc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, fleet.WebhookName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Webhooks) != 1 {
			t.Fatalf("%d validating webhooks, want 1", len(v.Webhooks))
		}
		vw := v.Webhooks[0]
		svc.Path = ptr.To(policyctl.PolicyWebhookPath)
		if diff := cmp.Diff(svc, vw.ClientConfig.Service); diff != "" {
			t.Errorf("policy webhook calls (-want +got):\n%s", diff)
		}
		if *vw.FailurePolicy != admissionregistrationv1.Fail || len(vw.Rules) != 1 || len(vw.Rules[0].Resources) != 4 {
			t.Errorf("policy webhook failurePolicy %s rules %+v, want Fail on the four policy kinds", *vw.FailurePolicy, vw.Rules)
		}
	})

	sa := "system:serviceaccount:" + ns + ":" + fullname
	t.Run("rbac", func(t *testing.T) {
		cr, err := hc.RbacV1().ClusterRoles().Get(ctx, fullname, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(grants(rbac.PolicyClusterRole().Rules), grants(cr.Rules)); diff != "" {
			t.Errorf("ClusterRole differs from config/rbac/policy-clusterrole.yaml (-want +chart):\n%s", diff)
		}
		role, err := hc.RbacV1().Roles(ns).Get(ctx, fullname, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(grants(rbac.PolicyRole().Rules), grants(role.Rules)); diff != "" {
			t.Errorf("Role differs from config/rbac/policy-role.yaml (-want +chart):\n%s", diff)
		}
		for _, c := range []struct {
			ns, verb, group, resource, name string
			want                            bool
		}{
			{ns, "update", "coordination.k8s.io", "leases", rbac.PolicyLeaseName, true},
			{ns, "update", "", "secrets", rbac.PolicyCertSecretName, true},
			{"", "update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", fleet.WebhookName, true},
			{"", "list", "policy.flotilla.io", "propagationpolicies", "", true},
			{"default", "update", "coordination.k8s.io", "leases", rbac.PolicyLeaseName, false},
			{ns, "update", "", "secrets", "other", false},
			{"", "get", "", "secrets", "", false},
			{"", "update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "someone-else", false},
		} {
			eventually(t, propagation, fmt.Sprintf("%s may %s %s/%s %q in %q: %v", sa, c.verb, c.group, c.resource, c.name, c.ns, c.want), func(ctx context.Context) (bool, string, error) {
				sar, err := hc.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Group: c.group, Resource: c.resource, Name: c.name},
				}}, metav1.CreateOptions{})
				if err != nil {
					return false, "", err
				}
				return sar.Status.Allowed == c.want, sar.Status.Reason, nil
			})
		}
	})

	// Admission accepted both replicas' pods (ServiceAccount, security
	// context); no host node runs them.
	eventually(t, propagation, "the Deployment's 2 pods are created", func(ctx context.Context) (bool, string, error) {
		pods, err := hc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + name})
		if err != nil {
			return false, err.Error(), nil
		}
		return len(pods.Items) == 2, fmt.Sprintf("%d pods", len(pods.Items)), nil
	})
	if _, err := hc.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, fullname, metav1.GetOptions{}); err != nil {
		t.Errorf("PodDisruptionBudget: %v", err)
	}

	t.Run("runs", func(t *testing.T) {
		d, err := hc.AppsV1().Deployments(ns).Get(ctx, fullname, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		args := append(podArgs(t, d), "--kubeconfig="+serviceAccountKubeconfig(t, ns, d.Spec.Template.Spec.ServiceAccountName))
		p, err := env.World.StartProcess("helm-policy-"+fmt.Sprint(time.Now().UnixNano()%100000), bin, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Stop() }()
		waitLease(t, ns, "") // only this replica runs in ns
		eventually(t, time.Minute, "flotilla-policy ready on the chart's probe port", func(ctx context.Context) (bool, string, error) {
			if exited, err := p.Exited(); exited {
				return false, "", fmt.Errorf("flotilla-policy exited: %v\n%s", err, p.LogTail(20))
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:8081/readyz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false, err.Error(), nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status, nil
		})
		s, err := hc.CoreV1().Secrets(ns).Get(ctx, rbac.PolicyCertSecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := hc.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, fleet.WebhookName, metav1.GetOptions{})
		v, _ := hc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, fleet.WebhookName, metav1.GetOptions{})
		if !bytes.Equal(m.Webhooks[0].ClientConfig.CABundle, s.Data["ca.crt"]) || !bytes.Equal(v.Webhooks[0].ClientConfig.CABundle, s.Data["ca.crt"]) {
			t.Error("the webhooks' caBundle is not the CA flotilla-policy keeps")
		}
		certs, err := certutil.ParseCertsPEM(s.Data["tls.crt"])
		if err != nil {
			t.Fatal(err)
		}
		leaf := certs[0]
		if want := fullname + "-webhook." + ns + ".svc"; !strings.Contains(strings.Join(leaf.DNSNames, " "), want) {
			t.Errorf("serving certificate names %v, want %s", leaf.DNSNames, want)
		}
	})

	helm("uninstall", name, "--wait")
	for what, get := range map[string]func(context.Context) error{
		"Deployment": func(ctx context.Context) error {
			_, err := hc.AppsV1().Deployments(ns).Get(ctx, fullname, metav1.GetOptions{})
			return err
		},
		"Service": func(ctx context.Context) error {
			_, err := hc.CoreV1().Services(ns).Get(ctx, fullname+"-webhook", metav1.GetOptions{})
			return err
		},
		"ServiceAccount": func(ctx context.Context) error {
			_, err := hc.CoreV1().ServiceAccounts(ns).Get(ctx, fullname, metav1.GetOptions{})
			return err
		},
		"PodDisruptionBudget": func(ctx context.Context) error {
			_, err := hc.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, fullname, metav1.GetOptions{})
			return err
		},
		"ClusterRole": func(ctx context.Context) error {
			_, err := hc.RbacV1().ClusterRoles().Get(ctx, fullname, metav1.GetOptions{})
			return err
		},
		"ClusterRoleBinding": func(ctx context.Context) error {
			_, err := hc.RbacV1().ClusterRoleBindings().Get(ctx, fullname, metav1.GetOptions{})
			return err
		},
		"Role": func(ctx context.Context) error {
			_, err := hc.RbacV1().Roles(ns).Get(ctx, fullname, metav1.GetOptions{})
			return err
		},
		"RoleBinding": func(ctx context.Context) error {
			_, err := hc.RbacV1().RoleBindings(ns).Get(ctx, fullname, metav1.GetOptions{})
			return err
		},
		"MutatingWebhookConfiguration": func(ctx context.Context) error {
			_, err := hc.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, fleet.WebhookName, metav1.GetOptions{})
			return err
		},
		"ValidatingWebhookConfiguration": func(ctx context.Context) error {
			_, err := hc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, fleet.WebhookName, metav1.GetOptions{})
			return err
		},
	} {
		gone(t, "flotilla-policy release's "+what, get)
	}
	for _, crd := range policyCRDs {
		if _, err := kubectl(ctx, nil, "get", "crd", crd); err != nil {
			t.Errorf("CRD %s after helm uninstall: %v", crd, err)
		}
	}
	if _, err := hc.CoreV1().Secrets(ns).Get(ctx, rbac.PolicyCertSecretName, metav1.GetOptions{}); err != nil {
		t.Errorf("the certificate Secret flotilla-policy made, after helm uninstall: %v", err)
	}
}

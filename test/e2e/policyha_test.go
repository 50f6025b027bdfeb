package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/config/rbac"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// replica is one flotilla-policy replica of the test and where it serves
// its metrics.
type replica struct {
	*testworld.Process
	metrics string // host:port
}

// leading reports whether the replica says it holds the Lease
// (controller-runtime's leader_election_master_status gauge).
func (r replica) leading(ctx context.Context) (bool, error) {
	fams, err := scrape(ctx, "http://"+r.metrics+"/metrics")
	if err != nil {
		return false, err
	}
	return value(fams, "leader_election_master_status", nil) == 1, nil
}

// reconciles is how many times the replica has reconciled a
// PropagationPolicy, whatever the result.
func (r replica) reconciles(ctx context.Context) (float64, error) {
	fams, err := scrape(ctx, "http://"+r.metrics+"/metrics")
	if err != nil {
		return 0, err
	}
	var n float64
	for _, m := range fams["controller_runtime_reconcile_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && l.GetValue() == "propagationpolicy" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n, nil
}

func waitLeading(t *testing.T, r replica) {
	t.Helper()
	eventually(t, time.Minute, r.Name()+" leads", func(ctx context.Context) (bool, string, error) {
		if exited, err := r.Exited(); exited {
			return false, "", fmt.Errorf("%s exited: %v\n%s", r.Name(), err, r.LogTail(20))
		}
		ok, err := r.leading(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return ok, "not leading", nil
	})
}

// TestPolicyHA runs flotilla-policy as the Helm chart does — two replicas
// with --leader-elect and self-managed webhook certificates — and kills the
// leader. Before: the certificate Secret is shared, both replicas serve the
// same certificate for the world's address, the webhook configurations'
// caBundle is filled by them and verifies it; only the leader runs the
// reconcilers (it writes a policy's status) while the follower, which the
// webhooks call, places the pods. After SIGKILL of the leader: the follower
// takes the Lease, writes a new policy's status and places a new
// Deployment through its webhook, and the pods placed before are the same
// pods (UIDs) on the same nodes — no churn.
func TestPolicyHA(t *testing.T) {
	bin := policyBinary(t)
	ctx, hc := t.Context(), hostClient()
	ns := namespace(t)
	takeOverWebhooks(t)

	ports, metricsPorts := make([]int, 2), make([]int, 2)
	for i := range ports {
		for _, into := range []*int{&ports[i], &metricsPorts[i]} {
			p, err := env.World.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			*into = p
		}
	}
	// The webhooks call the second replica: the test world routes no
	// Services, so this shows the follower serving them. Nothing trusts
	// anything yet: the replicas fill in the CA bundle.
	if err := fleet.RegisterPolicyWebhooks(ctx, env.World.Host(), fleet.PolicyWebhookURL(ports[1]), nil); err != nil {
		t.Fatal(err)
	}
	start := func(i int) replica {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPorts[i]))
		p, err := env.StartPolicyReplica(sctx, bin, ns, ports[i], "--rebalance-interval=2s", "--metrics-bind-address="+metrics)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop() })
		return replica{p, metrics}
	}
	leader := start(0)
	waitLeading(t, leader)
	lease := waitLease(t, ns, "")
	follower := start(1)

	t.Run("certificates", func(t *testing.T) {
		secret, err := hc.CoreV1().Secrets(ns).Get(ctx, rbac.PolicyCertSecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := hc.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, fleet.WebhookName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := hc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, fleet.WebhookName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bundle := secret.Data["ca.crt"]
		if len(bundle) == 0 || !bytes.Equal(m.Webhooks[0].ClientConfig.CABundle, bundle) || !bytes.Equal(v.Webhooks[0].ClientConfig.CABundle, bundle) {
			t.Fatalf("caBundle of the webhooks is not the Secret's ca.crt (%d bytes)", len(bundle))
		}
		var serials []string
		for _, port := range ports {
			serials = append(serials, servingSerial(t, port, bundle))
		}
		if serials[0] != serials[1] {
			t.Errorf("the replicas serve different certificates: %v", serials)
		}
	})

	applyYAML(t, ns, haPolicy("web", "clusterNames: [beijing, hangzhou]"))
	create(t, hc.AppsV1().Deployments(ns).Create, plainDeployment(ns, "web", 4))
	waitSplit(t, ns, "web", map[string]int{"beijing": 2, "hangzhou": 2})
	waitPolicyStatus(t, ns, "web", "beijing=2/2 hangzhou=2/2")
	// Only the leader reconciles.
	if n, err := leader.reconciles(ctx); err != nil || n == 0 {
		t.Errorf("the leader reconciled %v policies (%v)", n, err)
	}
	if n, err := follower.reconciles(ctx); err != nil || n != 0 {
		t.Errorf("the follower reconciled %v policies (%v); only the leader may", n, err)
	}
	if lead, err := follower.leading(ctx); err != nil || lead {
		t.Errorf("the follower says it leads (%v)", err)
	}
	before := placedPods(t, ns, "web")

	began := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	waitLeading(t, follower)
	after := waitLease(t, ns, *lease.Spec.HolderIdentity)
	t.Logf("the follower took over %s after SIGKILL of the leader (Lease transitions %d -> %d)",
		time.Since(began).Round(100*time.Millisecond), ptrInt(lease.Spec.LeaseTransitions), ptrInt(after.Spec.LeaseTransitions))

	applyYAML(t, ns, haPolicy("api", "clusterNames: [shenzhen]"))
	create(t, hc.AppsV1().Deployments(ns).Create, plainDeployment(ns, "api", 2))
	waitSplit(t, ns, "api", map[string]int{"shenzhen": 2})
	waitPolicyStatus(t, ns, "api", "shenzhen=2/2")
	// A change of web's policy that leaves its decision as it is: once the
	// new leader has recorded the new generation in the status, it has
	// reconciled web, and a leader that moved replicas would have issued
	// its eviction in that same pass.
	applyYAML(t, ns, strings.Replace(haPolicy("web", "clusterNames: [beijing, hangzhou]"), "spec:\n", "spec:\n  priority: 1\n", 1))
	eventually(t, time.Minute, "the new leader observes web's new generation", func(ctx context.Context) (bool, string, error) {
		out, err := kubectl(ctx, nil, "get", "propagationpolicy", "web", "-n", ns, "-o", "jsonpath={.metadata.generation} {.status.observedGeneration}")
		if err != nil {
			return false, err.Error(), nil
		}
		gens := strings.Fields(out)
		return len(gens) == 2 && gens[0] == gens[1] && gens[0] != "1", out, nil
	})
	waitPolicyStatus(t, ns, "web", "beijing=2/2 hangzhou=2/2")
	if got := placedPods(t, ns, "web"); !slices.Equal(got, before) {
		t.Errorf("web's pods changed across the takeover:\nbefore %v\nafter  %v", before, got)
	}
}

// takeOverWebhooks stops the flotilla-policy other tests share, if it runs,
// and removes its webhook configurations for the test; afterwards the
// test's are removed and the shared one is started again.
func takeOverWebhooks(t *testing.T) {
	t.Helper()
	shared := env.Policy()
	wasRunning := false
	if shared != nil {
		exited, _ := shared.Exited()
		wasRunning = !exited
		if err := shared.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	deleteWebhooks := func(ctx context.Context) {
		ar := hostClient().AdmissionregistrationV1()
		if err := ar.MutatingWebhookConfigurations().Delete(ctx, fleet.WebhookName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
		if err := ar.ValidatingWebhookConfigurations().Delete(ctx, fleet.WebhookName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	deleteWebhooks(t.Context())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		deleteWebhooks(ctx)
		if wasRunning {
			if _, err := env.StartPolicy(ctx, policyBin, "--rebalance-interval=2s"); err != nil {
				t.Error(err)
			}
		}
	})
}

// haPolicy places Deployment name with the given clusterAffinity, divided
// evenly.
func haPolicy(name, affinity string) string {
	return fmt.Sprintf(`
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: %[1]s
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: %[1]s
  placement:
    clusterAffinity:
      %[2]s
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
`, name, affinity)
}

func waitPolicyStatus(t *testing.T, ns, name, want string) {
	t.Helper()
	eventually(t, time.Minute, "status of policy "+name+" lists "+want, func(ctx context.Context) (bool, string, error) {
		out, err := kubectl(ctx, nil, "get", "propagationpolicy", name, "-n", ns,
			"-o", `jsonpath={range .status.templates[*].clusters[*]}{.name}={.desiredReplicas}/{.currentReplicas} {end}`)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.TrimSpace(out) == want, out, nil
	})
}

// placedPods lists app's pods as sorted "uid@node" strings, with
// " terminating" after a pod being deleted.
func placedPods(t *testing.T, ns, app string) []string {
	t.Helper()
	pods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		s := string(p.UID) + "@" + p.Spec.NodeName
		if p.DeletionTimestamp != nil {
			s += " terminating"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// waitLease waits until flotilla-policy's Lease in ns has a holder other
// than notHolder, and returns it.
func waitLease(t *testing.T, ns, notHolder string) *coordinationv1.Lease {
	t.Helper()
	var lease *coordinationv1.Lease
	eventually(t, time.Minute, "a flotilla-policy Lease holder other than "+strconv.Quote(notHolder), func(ctx context.Context) (bool, string, error) {
		l, err := hostClient().CoordinationV1().Leases(ns).Get(ctx, rbac.PolicyLeaseName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		lease = l
		h := ptrStr(l.Spec.HolderIdentity)
		return h != "" && h != notHolder, "holder " + h, nil
	})
	return lease
}

// servingSerial connects to the webhook server on port of the world's
// address as the apiserver does — trusting only bundle, checking the IP —
// and returns the serial number of the certificate it serves.
func servingSerial(t *testing.T, port int, bundle []byte) string {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(testworld.AdvertiseIP, strconv.Itoa(port)),
		&tls.Config{RootCAs: roots, ServerName: testworld.AdvertiseIP})
	if err != nil {
		t.Fatalf("TLS to the webhook server on port %d: %v", port, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func ptrStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func ptrInt(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

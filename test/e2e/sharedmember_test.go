package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flotilla.io/flotilla/internal/wellknown"
)

// The second installation of TestSharedMemberNamespace: a flotilla-node of
// its own identity forwarding into member beijing as virtual cluster
// bj-second, whose namespaces are suffixed (host shop → member
// shop-bj-second). A host namespace named like that, forwarded by the
// first installation to virtual node beijing unsuffixed, lands in the same
// member namespace: two hosts sharing a member and a namespace.
const (
	sharedMember     = "beijing"
	secondInstance   = "second-host"
	secondCluster    = "bj-second"
	secondInstallKey = "second-installation"
)

// TestSharedMemberNamespace: two installations share a member namespace.
// Deleting the host namespace on either side, or removing the second
// installation, never deletes or restarts the other's pods: the member
// namespace is kept, handed back, with an Event saying why.
func TestSharedMemberNamespace(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "second.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: flotilla.io/v1alpha1
kind: NodeConfig
virtualClusters:
- name: `+secondCluster+`
  nodeSelector: {matchLabels: {topology.kubernetes.io/region: cn-north}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := env.StartInstance(sharedMember, secondInstance, "--config="+cfg, "--installation-id="+secondInstallKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_, _ = env.RemoveMember(ctx, secondInstance) // again after the test's own removal: a no-op
	})
	if err := env.WaitVirtualNodeReady(t.Context(), secondInstance, secondCluster, time.Minute); err != nil {
		t.Fatal(err)
	}

	// Each pair runs a Deployment of each installation in one member
	// namespace; "creator" forwards first, so its installation created it.
	secondCreated := sharePair(t, "second")
	firstCreated := sharePair(t, "first")

	// The second installation's host namespace goes: the first's pods stay.
	deleteHostNamespace(t, secondCreated.secondHost)
	secondCreated.waitKept(t, secondInstallKey)
	secondCreated.checkUntouched(t, secondCreated.firstPods, sharedMember)

	// The first installation's host namespace goes: the second's pods stay.
	deleteHostNamespace(t, firstCreated.firstHost)
	firstCreated.waitKept(t, "")
	firstCreated.checkUntouched(t, firstCreated.secondPods, secondCluster)

	// The second installation is removed while it shares a namespace the
	// first uses, which it created.
	removal := sharePair(t, "second")
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if out, err := env.RemoveMember(ctx, secondInstance); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("flotilla-node --remove:\n%s", strings.TrimSpace(out))
	}
	removal.waitKept(t, secondInstallKey)
	removal.checkUntouched(t, removal.firstPods, sharedMember)
	if _, err := hostClient().CoreV1().Nodes().Get(t.Context(), secondCluster, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("virtual node %s after --remove: %v, want NotFound", secondCluster, err)
	}
}

// sharedPair is one member namespace both installations forward into.
type sharedPair struct {
	memberNS              string
	firstHost, secondHost string
	// firstPods and secondPods are the member pods' UIDs by name.
	firstPods, secondPods map[string]types.UID
}

func sharePair(t *testing.T, creator string) *sharedPair {
	t.Helper()
	s := &sharedPair{secondHost: namespace(t)}
	s.memberNS = s.secondHost + "-" + secondCluster
	s.firstHost = s.memberNS
	if _, err := hostClient().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.firstHost}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = hostClient().CoreV1().Namespaces().Delete(context.Background(), s.firstHost, metav1.DeleteOptions{})
		_ = memberClient(sharedMember).CoreV1().Namespaces().Delete(context.Background(), s.memberNS, metav1.DeleteOptions{})
	})
	run := func(ns, app, node string, replicas int32) map[string]types.UID {
		d := deployment(ns, app, replicas)
		d.Spec.Template.Spec.NodeSelector = map[string]string{wellknown.ClusterLabel: node}
		d.Spec.Template.Spec.TopologySpreadConstraints = nil
		create(t, hostClient().AppsV1().Deployments(ns).Create, d)
		waitSplit(t, ns, app, map[string]int{node: int(replicas)})
		return memberPodsRunning(t, s.memberNS, node, int(replicas))
	}
	if creator == "second" {
		s.secondPods = run(s.secondHost, "second", secondCluster, 1)
		s.firstPods = run(s.firstHost, "first", sharedMember, 2)
	} else {
		s.firstPods = run(s.firstHost, "first", sharedMember, 2)
		s.secondPods = run(s.secondHost, "second", secondCluster, 1)
	}
	ns, err := memberClient(sharedMember).CoreV1().Namespaces().Get(t.Context(), s.memberNS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"first": sharedMember, "second": secondCluster}[creator]; ns.Labels[wellknown.ClusterLabel] != want {
		t.Fatalf("member namespace %s was not created by the %s installation: labels %v", s.memberNS, creator, ns.Labels)
	}
	return s
}

// memberPodsRunning waits for n running member pods of virtual node node
// in ns and returns their UIDs by name.
func memberPodsRunning(t *testing.T, ns, node string, n int) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	eventually(t, 2*time.Minute, fmt.Sprintf("%d pods of %s running in member namespace %s", n, node, ns), func(ctx context.Context) (bool, string, error) {
		pods, err := memberClient(sharedMember).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: wellknown.ClusterLabel + "=" + node})
		if err != nil {
			return false, err.Error(), nil
		}
		clear(out)
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out[p.Name] = p.UID
			}
		}
		return len(out) == n, fmt.Sprint(len(out)), nil
	})
	return maps.Clone(out)
}

func deleteHostNamespace(t *testing.T, ns string) {
	t.Helper()
	if err := hostClient().CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitKept waits until the member namespace is no longer marked as the
// releasing installation's (empty: the host's own UID) and carries the
// Event saying why it was kept.
func (s *sharedPair) waitKept(t *testing.T, installation string) {
	t.Helper()
	eventually(t, 2*time.Minute, "member namespace "+s.memberNS+" kept and released", func(ctx context.Context) (bool, string, error) {
		ns, err := memberClient(sharedMember).CoreV1().Namespaces().Get(ctx, s.memberNS, metav1.GetOptions{})
		if err != nil {
			return false, "", fmt.Errorf("member namespace %s: %w", s.memberNS, err)
		}
		if ns.DeletionTimestamp != nil {
			return false, "", fmt.Errorf("member namespace %s is being deleted", s.memberNS)
		}
		if _, mine := ns.Labels[wellknown.ManagedByLabel]; mine {
			return false, fmt.Sprintf("labels %v", ns.Labels), nil
		}
		if installation != "" && !strings.HasPrefix(ns.Annotations[wellknown.ReleasedByAnnotation], installation+"/") {
			return false, fmt.Sprintf("annotations %v", ns.Annotations), nil
		}
		events, err := memberClient(sharedMember).CoreV1().Events(s.memberNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, e := range events.Items {
			if e.Reason == wellknown.EventNamespaceKept && e.InvolvedObject.Kind == "Namespace" {
				t.Logf("event on member namespace %s: %s", s.memberNS, e.Message)
				return true, "", nil
			}
		}
		return false, "no " + wellknown.EventNamespaceKept + " event", nil
	})
}

// checkUntouched checks that the member pods of node are the ones recorded:
// same names and UIDs, none deleted or being deleted, none restarted.
func (s *sharedPair) checkUntouched(t *testing.T, want map[string]types.UID, node string) {
	t.Helper()
	pods, err := memberClient(sharedMember).CoreV1().Pods(s.memberNS).List(t.Context(), metav1.ListOptions{LabelSelector: wellknown.ClusterLabel + "=" + node})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]types.UID{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			t.Errorf("member pod %s/%s of %s is being deleted", p.Namespace, p.Name, node)
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount > 0 {
				t.Errorf("member pod %s/%s of %s restarted %d times", p.Namespace, p.Name, node, c.RestartCount)
			}
		}
		got[p.Name] = p.UID
	}
	if !maps.Equal(got, want) {
		t.Errorf("member pods of %s in %s: %v, want the untouched %v", node, s.memberNS, got, want)
	}
}

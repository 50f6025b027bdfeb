package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"flotilla.io/flotilla/internal/wellknown"
)

// TestRemoveMember drains a cluster (here a virtual cluster of the edge
// member) and takes it back, then takes it out of the fleet with
// flotilla-node --remove: its pods move off it, and nothing of it is left
// — no node, lease or volume of it in the host, no pod, mirrored object,
// claim or namespace flotilla created in the member.
func TestRemoveMember(t *testing.T) {
	const node = "ke-leaving"
	hc, mc := hostClient(), memberClient(edgeMember)
	cfg := filepath.Join(t.TempDir(), "leaving.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: flotilla.io/v1alpha1
kind: NodeConfig
virtualClusters:
- name: `+node+`
  nodeSelector: {matchLabels: {location: beijing}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := env.StartNode(edgeMember, "--config="+cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	if err := env.WaitVirtualNodeReady(t.Context(), edgeMember, node, time.Minute); err != nil {
		t.Fatal(err)
	}

	ns := namespace(t)
	memberNS := ns + "-" + node
	create(t, hc.CoreV1().ConfigMaps(ns).Create, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: ns},
		Data: map[string]string{"mode": "on"}})
	d := deployment(ns, "web", 2)
	d.Spec.Template.Spec.NodeSelector = map[string]string{wellknown.ClusterLabel: node}
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}
	create(t, hc.AppsV1().Deployments(ns).Create, d)
	create(t, hc.CoreV1().Services(ns).Create, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}})
	waitSplit(t, ns, "web", map[string]int{node: 2})
	own := metav1.ListOptions{LabelSelector: wellknown.ClusterLabel + "=" + node}
	eventually(t, time.Minute, "the member holds the virtual cluster's pods, ConfigMap and Service", func(ctx context.Context) (bool, string, error) {
		pods, err1 := mc.CoreV1().Pods(memberNS).List(ctx, own)
		cms, err2 := mc.CoreV1().ConfigMaps(memberNS).List(ctx, own)
		svcs, err3 := mc.CoreV1().Services(memberNS).List(ctx, own)
		if err1 != nil || err2 != nil || err3 != nil {
			return false, fmt.Sprint(err1, err2, err3), nil
		}
		return len(pods.Items) == 2 && len(cms.Items) == 1 && len(svcs.Items) == 1,
			fmt.Sprintf("%d pods %d configmaps %d services", len(pods.Items), len(cms.Items), len(svcs.Items)), nil
	})
	// Draining the cluster evicts its pods, which leave the member; after
	// uncordon their replacements run there again.
	if out, err := kubectl(t.Context(), nil, "drain", node, "--ignore-daemonsets", "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	eventually(t, time.Minute, "drained: no pod of "+node+" in the member", func(ctx context.Context) (bool, string, error) {
		pods, err := mc.CoreV1().Pods(memberNS).List(ctx, own)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(pods.Items) == 0, fmt.Sprint(len(pods.Items)), nil
	})
	if out, err := kubectl(t.Context(), nil, "uncordon", node); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	waitSplit(t, ns, "web", map[string]int{node: 2})

	// A pod whose claim's data lives there.
	withStorageClass(t, "edge-disk", 1, edgeMember)
	db := podWithClaim(ns, "db", "data")
	db.Spec.NodeSelector = map[string]string{wellknown.ClusterLabel: node}
	makeClaim(t, ns, "data", "edge-disk")
	create(t, hc.CoreV1().Pods(ns).Create, db)
	eventually(t, time.Minute, "the claim bound in the member", func(ctx context.Context) (bool, string, error) {
		c, err := mc.CoreV1().PersistentVolumeClaims(memberNS).Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return c.Status.Phase == corev1.ClaimBound, string(c.Status.Phase), nil
	})
	// Something of the member's own in that namespace's neighbour stays.
	foreign := create(t, mc.CoreV1().ConfigMaps("default").Create, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "not-flotillas", Namespace: "default", Labels: map[string]string{wellknown.ClusterLabel: node}}})
	t.Cleanup(func() {
		_ = mc.CoreV1().ConfigMaps("default").Delete(context.Background(), foreign.Name, metav1.DeleteOptions{})
	})

	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if out, err := env.RemoveMember(ctx, edgeMember); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("flotilla-node --remove:\n%s", strings.TrimSpace(out))
	}

	if _, err := hc.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("host node %s: %v, want NotFound", node, err)
	}
	if _, err := hc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(t.Context(), node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("host lease %s: %v, want NotFound", node, err)
	}
	pods, err := hc.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			t.Errorf("host pod %s still bound to %s", p.Name, node)
		}
	}
	if _, err := mc.CoreV1().Namespaces().Get(t.Context(), memberNS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("member namespace %s: %v, want NotFound", memberNS, err)
	}
	for what, list := range map[string]func() (int, error){
		"pods": func() (int, error) {
			l, err := mc.CoreV1().Pods("").List(t.Context(), own)
			return len(l.Items), err
		},
		"services": func() (int, error) {
			l, err := mc.CoreV1().Services("").List(t.Context(), own)
			return len(l.Items), err
		},
		"secrets": func() (int, error) {
			l, err := mc.CoreV1().Secrets("").List(t.Context(), own)
			return len(l.Items), err
		},
		"claims": func() (int, error) {
			l, err := mc.CoreV1().PersistentVolumeClaims("").List(t.Context(), own)
			return len(l.Items), err
		},
	} {
		if n, err := list(); err != nil || n != 0 {
			t.Errorf("member %s of %s: %d left (%v)", what, node, n, err)
		}
	}
	// The host volume that stood for the claim is being deleted; the host's
	// volume protection keeps it while its claim, the user's, is bound to
	// it, and lets it go with the claim.
	vols, err := hc.CoreV1().PersistentVolumes().List(t.Context(), own)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols.Items {
		if v.DeletionTimestamp == nil {
			t.Errorf("host volume %s is not being deleted", v.Name)
		}
	}
	if err := hc.CoreV1().PersistentVolumeClaims(ns).Delete(t.Context(), "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "no host volume of "+node, func(ctx context.Context) (bool, string, error) {
		l, err := hc.CoreV1().PersistentVolumes().List(ctx, own)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, v := range l.Items {
			if v.DeletionTimestamp == nil {
				return false, "", fmt.Errorf("host volume %s is not being deleted", v.Name)
			}
		}
		return len(l.Items) == 0, fmt.Sprintf("%d left", len(l.Items)), nil
	})
	cms, err := mc.CoreV1().ConfigMaps("").List(t.Context(), own)
	if err != nil || len(cms.Items) != 1 || cms.Items[0].Name != foreign.Name {
		t.Errorf("member ConfigMaps labelled %s: %v (%v), want only the member's own %s", node, cms, err, foreign.Name)
	}
}

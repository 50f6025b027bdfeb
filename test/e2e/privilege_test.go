package e2e

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"flotilla.io/flotilla/test/fleet"
)

// TestNodeWritesOwnNodesOnly: with the credentials flotilla-node holds in
// the host, it may change its own virtual node, its status and its lease,
// and not another member's — whose status it could otherwise rewrite to
// send that node's logs and exec to an address of its choosing.
func TestNodeWritesOwnNodesOnly(t *testing.T) {
	path, err := env.World.Host().UserKubeconfig(fleet.HostIdentity("beijing"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	c := kubernetes.NewForConfigOrDie(cfg)
	dryRun := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	status := []byte(`{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.1"}]}}`)
	label := []byte(`{"metadata":{"labels":{"example.com/probe":"x"}}}`)
	for _, tc := range []struct {
		what  string
		patch func() error
		ok    bool
	}{
		{"its own node's status", func() error {
			_, err := c.CoreV1().Nodes().Patch(t.Context(), "beijing", types.MergePatchType, status, dryRun, "status")
			return err
		}, true},
		{"its own node", func() error {
			_, err := c.CoreV1().Nodes().Patch(t.Context(), "beijing", types.MergePatchType, label, dryRun)
			return err
		}, true},
		{"its own lease", func() error {
			_, err := c.CoordinationV1().Leases("kube-node-lease").Patch(t.Context(), "beijing", types.MergePatchType, label, dryRun)
			return err
		}, true},
		{"another node's status", func() error {
			_, err := c.CoreV1().Nodes().Patch(t.Context(), "hangzhou", types.MergePatchType, status, dryRun, "status")
			return err
		}, false},
		{"another node", func() error {
			_, err := c.CoreV1().Nodes().Patch(t.Context(), "hangzhou", types.MergePatchType, label, dryRun)
			return err
		}, false},
		{"another node's lease", func() error {
			_, err := c.CoordinationV1().Leases("kube-node-lease").Patch(t.Context(), "hangzhou", types.MergePatchType, label, dryRun)
			return err
		}, false},
		{"deleting another node", func() error {
			return c.CoreV1().Nodes().Delete(t.Context(), "hangzhou", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}, false},
	} {
		err := tc.patch()
		switch {
		case tc.ok && err != nil:
			t.Errorf("flotilla-node:beijing may not change %s: %v", tc.what, err)
		case !tc.ok && !apierrors.IsForbidden(err):
			t.Errorf("flotilla-node:beijing changing %s: %v, want Forbidden", tc.what, err)
		}
	}
}

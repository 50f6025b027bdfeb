package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	vke2e "github.com/virtual-kubelet/virtual-kubelet/test/e2e"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// vkSuiteMember is the member whose virtual node runs virtual-kubelet's
// suite. The suite fetches /stats/summary and /metrics/resource through
// the pods/proxy of a pod named after the node on port 10250 (where a
// virtual kubelet deployed as a pod serves), so that member's flotilla-node
// listens on 10250 for the duration of the test.
const vkSuiteMember = "shenzhen"

// TestVirtualKubeletSuite runs virtual-kubelet's own end-to-end suite
// (github.com/virtual-kubelet/virtual-kubelet/test/e2e, every test, none
// skipped) against a flotilla virtual node: pods listed by the node and by
// the provider, graceful and forced deletion, stats and resource metrics,
// and the events for missing optional and mandatory Secrets and ConfigMaps.
//
// The suite reaches the node's kubelet API through the pods/proxy of a pod
// named after the node, as where the virtual kubelet runs in that pod. The
// apiserver's pod proxy calls without credentials, so:
//   - flotilla-node runs with --anonymous-auth, as a kubelet would have to:
//     such calls are user system:anonymous, still authorized by
//     SubjectAccessReview, and the host grants that user nodes/stats and
//     nodes/metrics of this one node and nothing else (TestKubeletAPIAuth
//     checks that, without the flag, anonymous calls get 401);
//   - the pod named after the node is a hostNetwork pod bound to the
//     virtual node itself. It is forwarded into the member, whose kwok gives
//     a hostNetwork pod its node's address, which in the test world is
//     AdvertiseIP, where flotilla-node listens. flotilla reports that
//     address back as the host pod's IP, and the proxy reaches flotilla-node.
//
// It needs the member's metrics API, which flotilla-node reads for stats.
func TestVirtualKubeletSuite(t *testing.T) {
	const member = vkSuiteMember
	ctx := t.Context()
	ns := namespace(t)
	if err := env.World.StartMetricsServers(ctx, member); err != nil {
		t.Fatal(err)
	}
	grantAnonymousStats(t, member)

	if err := restartNode(ctx, member, "--kubelet-port=10250", "--anonymous-auth"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// t.Context() is done by now.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := restartNode(ctx, member); err != nil {
			t.Error(err)
		}
	})

	standIn := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: member, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                      member,
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "flotilla-node", Image: "flotilla-node",
				Ports: []corev1.ContainerPort{{Name: "kubelet", ContainerPort: 10250}}}},
		},
	}
	create(t, hostClient().CoreV1().Pods(ns).Create, standIn)
	eventually(t, time.Minute, "pod "+member+" Ready with an IP", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, member, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return podReady(p) && p.Status.PodIP != "", fmt.Sprintf("%s %q", p.Status.Phase, p.Status.PodIP), nil
	})

	vke2e.NewEndToEndTestSuite(vke2e.EndToEndTestSuiteConfig{
		Kubeconfig:   env.World.Host().KubeconfigPath,
		Namespace:    ns,
		NodeName:     member,
		WatchTimeout: 2 * time.Minute,
	}).Run(t)
}

// grantAnonymousStats lets unauthenticated callers read the stats and
// resource metrics of one node's kubelet API, until the test ends.
func grantAnonymousStats(t *testing.T, node string) {
	t.Helper()
	rbac := hostClient().RbacV1()
	name := "anonymous-stats-" + node
	create(t, rbac.ClusterRoles().Create, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/stats", "nodes/metrics"},
			ResourceNames: []string{node}, Verbs: []string{"get"}}},
	})
	create(t, rbac.ClusterRoleBindings().Create, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:anonymous"}},
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
}

// restartNode stops member's flotilla-node and starts it again with
// extraArgs, waiting until its virtual node is Ready on the kubelet port the
// arguments give (the fleet's own port without one).
func restartNode(ctx context.Context, member string, extraArgs ...string) error {
	if err := env.Node(member).Stop(); err != nil {
		return fmt.Errorf("stop flotilla-node of %s: %w", member, err)
	}
	if _, err := env.StartNode(member, extraArgs...); err != nil {
		return err
	}
	port := int32(env.KubeletPort(member))
	for _, a := range extraArgs {
		if v, ok := strings.CutPrefix(a, "--kubelet-port="); ok {
			p, err := strconv.Atoi(v)
			if err != nil {
				return err
			}
			port = int32(p)
		}
	}
	if err := env.WaitNodeReady(ctx, member, time.Minute); err != nil {
		return err
	}
	var got int32
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := hostClient().CoreV1().Nodes().Get(ctx, member, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = n.Status.DaemonEndpoints.KubeletEndpoint.Port
		return got == port, nil
	})
	if err != nil {
		return fmt.Errorf("node %s serves its kubelet API on port %d, want %d: %w", member, got, port, err)
	}
	return nil
}

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/testworld"
)

// TestVirtualNodes checks that each member appears as a virtual node with
// the conventional labels, the default taint, the member's capacity, and an
// address the host apiserver can proxy to.
func TestVirtualNodes(t *testing.T) {
	for _, name := range members {
		n, err := hostClient().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("virtual node %s: %v", name, err)
		}
		for k, v := range map[string]string{
			wellknown.ClusterLabel: name, "type": "virtual-kubelet", "kubernetes.io/role": "agent",
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
		} {
			if n.Labels[k] != v {
				t.Errorf("node %s label %s = %q, want %q", name, k, n.Labels[k], v)
			}
		}
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != wellknown.ProviderTaintKey || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
			t.Errorf("node %s taints = %+v", name, n.Spec.Taints)
		}
		if n.Status.Addresses[0].Type != corev1.NodeInternalIP || n.Status.Addresses[0].Address != testworld.AdvertiseIP {
			t.Errorf("node %s addresses = %+v", name, n.Status.Addresses)
		}
		if n.Status.NodeInfo.KubeletVersion == "" || n.Status.NodeInfo.KubeletVersion == "unknown" {
			t.Errorf("node %s version = %q, want the member's", name, n.Status.NodeInfo.KubeletVersion)
		}
		// Two kwok nodes of 32 CPUs and 110 pods each, once what earlier
		// tests left in the member has drained away.
		eventually(t, time.Minute, "node "+name+" offers its member's capacity", func(ctx context.Context) (bool, string, error) {
			n, err := hostClient().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			cpu, pods := n.Status.Allocatable[corev1.ResourceCPU], n.Status.Allocatable[corev1.ResourcePods]
			return cpu.Cmp(resource.MustParse("64")) == 0 && pods.Value() == 220, fmt.Sprintf("cpu=%s pods=%s", cpu.String(), pods.String()), nil
		})
	}
}

// TestCapacityFollowsMemberNodes adds a node to a member, makes it NotReady
// by cordoning, and removes it, watching the virtual node's allocatable follow.
func TestCapacityFollowsMemberNodes(t *testing.T) {
	const member = "hangzhou"
	mc := memberClient(member)
	cpuIs := func(want string) func(ctx context.Context) (bool, string, error) {
		return func(ctx context.Context) (bool, string, error) {
			n, err := hostClient().CoreV1().Nodes().Get(ctx, member, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			cpu := n.Status.Allocatable[corev1.ResourceCPU]
			return cpu.Cmp(resource.MustParse(want)) == 0, "cpu=" + cpu.String(), nil
		}
	}
	extra := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "hangzhou-extra", Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"type": "kwok", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}
	if _, err := mc.CoreV1().Nodes().Create(t.Context(), extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.CoreV1().Nodes().Delete(context.Background(), extra.Name, metav1.DeleteOptions{}) })
	eventually(t, time.Minute, "allocatable grows with a new Ready member node", cpuIs("80"))

	// Patches, not updates: kwok writes the node's status all the time.
	cordon := func(unschedulable bool) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable)
		if _, err := mc.CoreV1().Nodes().Patch(t.Context(), extra.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cordon(true)
	eventually(t, time.Minute, "a cordoned member node stops counting", cpuIs("64"))
	cordon(false)
	eventually(t, time.Minute, "uncordoned node counts again", cpuIs("80"))
	if err := mc.CoreV1().Nodes().Delete(t.Context(), extra.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "a removed member node stops counting", cpuIs("64"))
}

// TestDeploymentAcrossMembers is the walking skeleton: 30 replicas created in
// the host run in the three members, each host pod mirrored by exactly one
// member pod with the same phase and IP; scaling to zero leaves nothing behind.
func TestDeploymentAcrossMembers(t *testing.T) {
	ns := namespace(t)
	apps := hostClient().AppsV1().Deployments(ns)
	if _, err := apps.Create(t.Context(), deployment(ns, "web", 30), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "30 host pods Running and Ready, each mirrored in its member", func(ctx context.Context) (bool, string, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error(), nil
		}
		ready, perNode := 0, map[string]int{}
		for i := range pods.Items {
			p := &pods.Items[i]
			if !podReady(p) {
				continue
			}
			m, err := memberPodOf(ctx, p)
			if err != nil {
				return false, "", err
			}
			if m == nil {
				return false, fmt.Sprintf("host pod %s Ready but no member pod", p.Name), nil
			}
			if m.Status.Phase != p.Status.Phase || m.Status.PodIP != p.Status.PodIP || m.Status.PodIP == "" {
				return false, fmt.Sprintf("pod %s: host %s/%s member %s/%s", p.Name, p.Status.Phase, p.Status.PodIP, m.Status.Phase, m.Status.PodIP), nil
			}
			if m.Namespace != ns || m.Name != p.Name {
				return false, "", fmt.Errorf("member pod %s/%s for host pod %s/%s", m.Namespace, m.Name, ns, p.Name)
			}
			ready++
			perNode[p.Spec.NodeName]++
		}
		msg := fmt.Sprintf("%d/%d ready, per node %v", ready, len(pods.Items), perNode)
		return ready == 30 && len(pods.Items) == 30 && len(perNode) == 3, msg, nil
	})

	// Pod IPs come from each member's own pod CIDR, proving the status is the member's.
	pods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		_, cidr, err := net.ParseCIDR(env.World.Member(p.Spec.NodeName).PodCIDR)
		if err != nil {
			t.Fatal(err)
		}
		if !cidr.Contains(net.ParseIP(p.Status.PodIP)) {
			t.Errorf("host pod %s on %s has IP %s outside that member's %s", p.Name, p.Spec.NodeName, p.Status.PodIP, cidr)
		}
	}

	if _, err := apps.Patch(t.Context(), "web", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "scale to zero leaves no host or member pods", func(ctx context.Context) (bool, string, error) {
		hostPods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		left := 0
		for _, name := range members {
			mp, err := memberClient(name).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			left += len(mp.Items)
		}
		return len(hostPods.Items) == 0 && left == 0, fmt.Sprintf("host pods %d, member pods %d", len(hostPods.Items), left), nil
	})

	// The pods' events are what a user reads in kubectl describe: the host
	// scheduler's and the members' own, mirrored under their component's
	// name; no warning for an ordinary scale-down, and nothing that only says
	// forwarding worked — each such event would be a host write per pod.
	events, err := hostClient().CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod"})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, e := range events.Items {
		component := e.Source.Component
		if component == "" {
			component = e.ReportingController
		}
		reasons[component+"/"+e.Reason]++
		if e.Type == corev1.EventTypeWarning {
			t.Errorf("warning event on %s: %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	t.Logf("host pod events by component/reason: %v", reasons)
	for r, n := range reasons {
		if strings.Contains(r, "/Provider") {
			t.Errorf("%d host pod events %s", n, r)
		}
	}
	if reasons["default-scheduler/Scheduled"] < 60 {
		t.Errorf("host pod events: want the host's and, mirrored, the members' Scheduled events, 60 in all; got %v", reasons)
	}
}

// TestMemberPodDeletedOutOfBand deletes a forwarded pod directly in its
// member. The host pod must not linger as a ghost: as a pod deleted in one
// cluster, it is gone, with a warning saying where it was deleted, and the
// Deployment replaces it.
func TestMemberPodDeletedOutOfBand(t *testing.T) {
	ns := namespace(t)
	if _, err := hostClient().AppsV1().Deployments(ns).Create(t.Context(), deployment(ns, "victim", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyPods := func(ctx context.Context) ([]corev1.Pod, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []corev1.Pod
		for _, p := range pods.Items {
			if podReady(&p) {
				out = append(out, p)
			}
		}
		return out, nil
	}
	var victim corev1.Pod
	eventually(t, 2*time.Minute, "3 pods Ready", func(ctx context.Context) (bool, string, error) {
		ps, err := readyPods(ctx)
		if err != nil || len(ps) != 3 {
			return false, fmt.Sprintf("%d ready (%v)", len(ps), err), nil
		}
		victim = ps[0]
		return true, "", nil
	})
	m, err := memberPodOf(t.Context(), &victim)
	if err != nil || m == nil {
		t.Fatalf("member pod of %s: %v %v", victim.Name, m, err)
	}
	if err := memberClient(victim.Spec.NodeName).CoreV1().Pods(m.Namespace).Delete(t.Context(), m.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "host pod gone", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("phase %s reason %q", p.Status.Phase, p.Status.Reason), nil
	})
	eventually(t, 2*time.Minute, "the Deployment replaces the pod", func(ctx context.Context) (bool, string, error) {
		ps, err := readyPods(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, p := range ps {
			if p.UID == victim.UID {
				return false, "victim still Ready", nil
			}
		}
		return len(ps) == 3, fmt.Sprintf("%d ready", len(ps)), nil
	})
	events, err := hostClient().CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + victim.Name})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		found = found || (e.Reason == wellknown.EventMemberPodDeleted && e.Type == corev1.EventTypeWarning)
	}
	if !found {
		t.Errorf("no %s Warning event on host pod %s", wellknown.EventMemberPodDeleted, victim.Name)
	}
}

// TestMemberUnreachable stops a member's apiserver: its virtual node turns
// NotReady with reason MemberUnreachable, and Ready again once it is back.
func TestMemberUnreachable(t *testing.T) {
	const member = "shenzhen"
	readyIs := func(want corev1.ConditionStatus, reason string) func(ctx context.Context) (bool, string, error) {
		return func(ctx context.Context) (bool, string, error) {
			n, err := hostClient().CoreV1().Nodes().Get(ctx, member, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status == want && c.Reason == reason, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message), nil
				}
			}
			return false, "no Ready condition", nil
		}
	}
	_, back := goDark(t, member)
	eventually(t, time.Minute, "virtual node NotReady while its member is dark", readyIs(corev1.ConditionFalse, "MemberUnreachable"))
	back()
	eventually(t, time.Minute, "virtual node Ready once its member is back", readyIs(corev1.ConditionTrue, "MemberReachable"))
}

// TestBadKubeconfig runs flotilla-node with a malformed member kubeconfig: it
// must exit at once with an error naming the file and the problem.
func TestBadKubeconfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "member.kubeconfig")
	if err := os.WriteFile(bad, []byte("this: [is not a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		path string
		want string
	}{
		"malformed": {bad, "cannot be parsed"},
		"missing":   {filepath.Join(dir, "absent.kubeconfig"), "does not exist"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, env.NodeBinary, "--cluster-name=x",
				"--host-kubeconfig="+env.World.Host().KubeconfigPath, "--member-kubeconfig="+tc.path).CombinedOutput()
			if err == nil {
				t.Fatalf("flotilla-node succeeded with %s kubeconfig", name)
			}
			if s := string(out); !strings.Contains(s, tc.path) || !strings.Contains(s, tc.want) {
				t.Errorf("output %q does not name %s and %q", s, tc.path, tc.want)
			}
		})
	}
}

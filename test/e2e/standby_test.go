package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/testworld"
)

// TestStandbyTakeover runs an active/standby pair of flotilla-nodes for one
// member. Killing the active one hands the member to the standby, which
// adopts every forwarded pod: no host or member pod is replaced, the
// virtual node stays Ready, and new pods are forwarded again.
func TestStandbyTakeover(t *testing.T) {
	const member = "beijing"
	args := []string{"--leader-elect", "--leader-election-namespace=default", "--leader-elect-lease-duration=4s"}
	if err := env.Node(member).Stop(); err != nil {
		t.Fatal(err)
	}
	var pair []*testworld.Process
	for range 2 {
		p, err := env.StartNode(member, args...)
		if err != nil {
			t.Fatal(err)
		}
		pair = append(pair, p)
	}
	t.Cleanup(func() {
		for _, p := range pair {
			_ = p.Stop()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := env.StartNode(member); err != nil {
			t.Error(err)
			return
		}
		if err := env.WaitNodeReady(ctx, member, time.Minute); err != nil {
			t.Error(err)
		}
	})
	if err := env.WaitNodeReady(t.Context(), member, time.Minute); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	d := deployment(ns, "web", 4)
	d.Spec.Template.Spec.NodeSelector = map[string]string{wellknown.ClusterLabel: member}
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	create(t, hostClient().AppsV1().Deployments(ns).Create, d)
	waitSplit(t, ns, "web", map[string]int{member: 4})
	before := podUIDs(t, ns)

	var active, standby *testworld.Process
	eventually(t, time.Minute, "one flotilla-node active", func(context.Context) (bool, string, error) {
		for i, p := range pair {
			if strings.Contains(p.LogTail(200), "active: holding the leader Lease") {
				active, standby = p, pair[1-i]
				return true, "", nil
			}
		}
		return false, "", nil
	})
	select {
	case <-standby.Done():
		t.Fatalf("the standby exited before the takeover:\n%s", standby.LogTail(20))
	default:
	}
	if err := syscall.Kill(active.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-active.Done()
	eventually(t, time.Minute, "the standby takes over", func(context.Context) (bool, string, error) {
		return strings.Contains(standby.LogTail(200), "active: holding the leader Lease"), "", nil
	})
	// New pods are forwarded by the new active one.
	scale(t, ns, "web", 5)
	waitSplit(t, ns, "web", map[string]int{member: 5})
	after := podUIDs(t, ns)
	for host, m := range before {
		if after[host] != m {
			t.Errorf("host pod %s: member pod %s before the takeover, %q after", host, m, after[host])
		}
	}
	n, err := hostClient().CoreV1().Nodes().Get(t.Context(), member, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			t.Errorf("virtual node %s: Ready=%s (%s)", member, c.Status, c.Reason)
		}
	}
}

// podUIDs maps the UIDs of the host pods of namespace ns to the UIDs of
// their member pods.
func podUIDs(t *testing.T, ns string) map[types.UID]types.UID {
	t.Helper()
	pods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]types.UID{}
	for i := range pods.Items {
		hp := &pods.Items[i]
		if hp.DeletionTimestamp != nil {
			continue
		}
		mp, err := memberPodOf(t.Context(), hp)
		if err != nil || mp == nil {
			t.Fatalf("member pod of %s: %v %v", hp.Name, mp, err)
		}
		out[hp.UID] = mp.UID
	}
	return out
}

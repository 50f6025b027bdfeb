package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// evictable is a Deployment whose pods leave a NotReady virtual node after
// two seconds instead of the default five minutes, spread over clusters on a
// best-effort basis so that they can all run on the remaining ones.
func evictable(ns, name string, replicas int32) *appsv1.Deployment {
	d := deployment(ns, name, replicas)
	spec := &d.Spec.Template.Spec
	spec.TopologySpreadConstraints[0].WhenUnsatisfiable = corev1.ScheduleAnyway
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](2)})
	}
	return d
}

// TestMemberLoss stops a member's apiserver: its virtual node turns NotReady,
// the host's taint-based eviction moves the pods to the other members, and
// when the member comes back its stale pods are removed, leaving exactly
// `replicas` pods across all members.
func TestMemberLoss(t *testing.T) {
	const dark = "shenzhen"
	const replicas = 6
	ns := namespace(t)
	if _, err := hostClient().AppsV1().Deployments(ns).Create(t.Context(), evictable(ns, "resilient", replicas), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	onDark := 0
	eventually(t, 2*time.Minute, "all pods Ready, some on "+dark, func(ctx context.Context) (bool, string, error) {
		ready, problems, err := podCensus(ctx, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + dark})
		if err != nil {
			return false, err.Error(), nil
		}
		onDark = len(pods.Items)
		if ready == replicas && len(problems) == 0 && onDark > 0 {
			return true, "", nil
		}
		// Why the host kept pods off the dark-to-be member, if it did.
		leftOut, err := namespaceEvents(ctx, ns, "ClustersLeftOut")
		if err != nil {
			return false, err.Error(), nil
		}
		others, err := hostClient().CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + dark})
		if err != nil {
			return false, err.Error(), nil
		}
		var there []string
		for _, p := range others.Items {
			there = append(there, fmt.Sprintf("%s/%s %s deleting=%v", p.Namespace, p.Name, p.Status.Phase, p.DeletionTimestamp != nil))
		}
		return false, fmt.Sprintf("ready %d, on %s %d, %v; left out: %v; pods on %s in any namespace: %v",
			ready, dark, onDark, problems, leftOut, dark, there), nil
	})

	_, back := goDark(t, dark)
	eventually(t, 3*time.Minute, "replacements Ready on the other members", func(ctx context.Context) (bool, string, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ready := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if podReady(p) && p.DeletionTimestamp == nil && p.Spec.NodeName != dark {
				ready++
			}
		}
		return ready == replicas, fmt.Sprintf("%d Ready off %s", ready, dark), nil
	})
	back()
	eventually(t, 3*time.Minute, "stale member pods cleaned up: exactly one member pod per live host pod", func(ctx context.Context) (bool, string, error) {
		ready, problems, err := podCensus(ctx, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		total := 0
		for _, name := range members {
			mp, err := memberClient(name).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			total += len(mp.Items)
		}
		return ready == replicas && total == replicas && len(problems) == 0,
			fmt.Sprintf("ready %d, member pods %d, %v", ready, total, problems), nil
	})
	if err := env.WaitNodeReady(t.Context(), dark, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestMemberBlip makes a member unreachable for 30 seconds: with default
// tolerations nothing is evicted, replaced or recreated.
func TestMemberBlip(t *testing.T) {
	const member = "hangzhou"
	ns := namespace(t)
	if _, err := hostClient().AppsV1().Deployments(ns).Create(t.Context(), deployment(ns, "steady", 6), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	snapshot := func(ctx context.Context) (host, member map[types.UID]bool, err error) {
		host, member = map[types.UID]bool{}, map[types.UID]bool{}
		hp, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, err
		}
		for _, p := range hp.Items {
			host[p.UID] = podReady(&p)
		}
		for _, name := range members {
			mp, err := memberClient(name).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, nil, err
			}
			for _, p := range mp.Items {
				member[p.UID] = true
			}
		}
		return host, member, nil
	}
	var before, beforeMember map[types.UID]bool
	eventually(t, 2*time.Minute, "6 pods Ready", func(ctx context.Context) (bool, string, error) {
		ready, problems, err := podCensus(ctx, ns)
		if err != nil || ready != 6 || len(problems) > 0 {
			return false, fmt.Sprint(ready, problems, err), nil
		}
		before, beforeMember, err = snapshot(ctx)
		return err == nil && len(before) == 6, fmt.Sprint(len(before)), nil
	})
	c := env.World.Member(member)
	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	// The member stays dark for 30 s: this wait is the scenario, not a
	// stand-in for a condition.
	select {
	case <-time.After(30 * time.Second):
	case <-t.Context().Done():
	}
	if err := c.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitNodeReady(t.Context(), member, time.Minute); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the same 6 pods Ready again, nothing replaced", func(ctx context.Context) (bool, string, error) {
		after, afterMember, err := snapshot(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		for uid := range before {
			if !after[uid] {
				return false, fmt.Sprintf("host pod %s gone or not Ready", uid), nil
			}
		}
		if len(after) != len(before) || len(afterMember) != len(beforeMember) {
			return false, fmt.Sprintf("host pods %d->%d, member pods %d->%d", len(before), len(after), len(beforeMember), len(afterMember)), nil
		}
		for uid := range beforeMember {
			if !afterMember[uid] {
				return false, "member pod " + string(uid) + " replaced", nil
			}
		}
		return true, "", nil
	})
}

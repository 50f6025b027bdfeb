package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// memberKubectl runs the kubectl of member cluster name's version against
// it as its administrator, as the member's own operators would.
func memberKubectl(ctx context.Context, name string, args ...string) (string, error) {
	m := env.World.Member(name)
	cmd := exec.CommandContext(ctx, m.Kubectl(), append([]string{"--kubeconfig=" + m.KubeconfigPath}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s in %s: %w: %s", strings.Join(args, " "), name, err, errOut.String())
	}
	return out.String(), nil
}

// cordonInMember sets a member node's spec.unschedulable; the test's
// cleanup makes it schedulable again.
func cordonInMember(t *testing.T, member, node string, cordoned bool) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, cordoned)
	if _, err := memberClient(member).CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = memberClient(member).CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType,
			[]byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
	})
}

// quickToGo is a Deployment whose pods stop within a second, so that
// evictions and drains end fast.
func quickToGo(ns, name string, replicas int32) *appsv1.Deployment {
	d := deployment(ns, name, replicas)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return d
}

// appPods lists the host pods of app in ns.
func appPods(ctx context.Context, ns, app string) ([]corev1.Pod, error) {
	l, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// TestMemberDrainLeavesNoFailedPods drains a member node as the member's
// administrators do (kubectl drain, through the member's eviction API).
// As in one cluster, the evicted pods of a Deployment are gone from the
// host and replaced where they fit, with an event saying where they were
// evicted, and no Failed pod is left behind; a bare pod, which nothing
// replaces, ends Failed with the reason, as a kubelet eviction leaves it.
func TestMemberDrainLeavesNoFailedPods(t *testing.T) {
	const member, app, group = "hangzhou", "memberdrain", "member-drain"
	drainedNode, spareNode := member+"-node-1", member+"-node-2"
	ns := namespace(t)
	// Every pod the member gets goes to the node about to be drained.
	cordonInMember(t, member, spareNode, true)
	d := quickToGo(ns, app, 6)
	d.Spec.Template.Labels["group"] = group
	create(t, hostClient().AppsV1().Deployments(ns).Create, d)
	lone := barePod(ns, "lone", member)
	lone.Labels["group"] = group
	lone.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	create(t, hostClient().CoreV1().Pods(ns).Create, lone)

	var victims []corev1.Pod
	eventually(t, 2*time.Minute, "6 pods Ready, 2 of them in "+member, func(ctx context.Context) (bool, string, error) {
		ready, problems, err := podCensus(ctx, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		pods, err := appPods(ctx, ns, app)
		if err != nil {
			return false, err.Error(), nil
		}
		victims = nil
		for _, p := range pods {
			if p.Spec.NodeName == member {
				victims = append(victims, p)
			}
		}
		// ready counts the lone pod too.
		return ready == 7 && len(problems) == 0 && len(victims) == 2, fmt.Sprintf("ready %d, in %s %d, %v", ready, member, len(victims), problems), nil
	})
	waitPodReady(t, ns, lone.Name)

	cordonInMember(t, member, spareNode, false)
	// Member pods have no controller in the member (the host's controllers
	// own the pods), so a drain there needs --force, as for any bare pod.
	began := time.Now()
	if out, err := memberKubectl(t.Context(), member, "drain", drainedNode, "--ignore-daemonsets", "--delete-emptydir-data", "--force",
		"--pod-selector=group="+group, "--timeout=90s"); err != nil {
		t.Fatalf("drain %s in %s: %v\n%s", drainedNode, member, err, out)
	}
	t.Cleanup(func() { _, _ = memberKubectl(context.Background(), member, "uncordon", drainedNode) })

	eventually(t, 2*time.Minute, "6 of 6 Ready again, the evicted pods gone, none Failed", func(ctx context.Context) (bool, string, error) {
		pods, err := appPods(ctx, ns, app)
		if err != nil {
			return false, err.Error(), nil
		}
		ready := 0
		var left []string
		for _, p := range pods {
			if podReady(&p) && p.DeletionTimestamp == nil {
				ready++
			}
			if p.Status.Phase == corev1.PodFailed || slices.ContainsFunc(victims, func(v corev1.Pod) bool { return v.UID == p.UID }) {
				left = append(left, fmt.Sprintf("%s %s %s %q", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message))
			}
		}
		return ready == 6 && len(pods) == 6 && len(left) == 0, fmt.Sprintf("%d pods, %d Ready; left behind: %v", len(pods), ready, left), nil
	})
	t.Logf("Deployment whole again %s after the drain began", time.Since(began).Round(time.Millisecond))
	for _, v := range victims {
		waitEvent(t, ns, v.Name, corev1.EventTypeNormal, wellknown.EventMemberPodEvicted, "evicted in member cluster "+member)
	}

	eventually(t, time.Minute, "the bare pod Failed, saying it was evicted", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, lone.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == wellknown.ReasonMemberPodDeleted &&
				strings.Contains(p.Status.Message, "evicted in member cluster "+member),
			fmt.Sprintf("%s %s %q", p.Status.Phase, p.Status.Reason, p.Status.Message), nil
	})
	_, problems, err := podCensus(t.Context(), ns)
	if err != nil || len(problems) > 0 {
		t.Errorf("member pods after the drain: %v %v", problems, err)
	}
}

// TestHostDrainWithPDB drains a virtual node in the host with kubectl
// drain: the PodDisruptionBudget holds throughout (never fewer than its
// minAvailable Ready), the drain succeeds, and the cluster is left without
// a pod of the Deployment, in the host and in the member.
func TestHostDrainWithPDB(t *testing.T) {
	const cluster, app = "shenzhen", "hostdrain"
	ns := namespace(t)
	d := quickToGo(ns, app, 6)
	// A cordoned cluster no longer counts for the spread, so the
	// replacements may go to the others.
	d.Spec.Template.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
	create(t, hostClient().AppsV1().Deployments(ns).Create, d)
	create(t, hostClient().PolicyV1().PodDisruptionBudgets(ns).Create, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(4)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	})
	eventually(t, 2*time.Minute, "6 pods Ready, some in "+cluster, func(ctx context.Context) (bool, string, error) {
		ready, problems, err := podCensus(ctx, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + cluster})
		if err != nil {
			return false, err.Error(), nil
		}
		return ready == 6 && len(problems) == 0 && len(pods.Items) > 0, fmt.Sprintf("ready %d, in %s %d, %v", ready, cluster, len(pods.Items), problems), nil
	})
	eventually(t, time.Minute, "the budget sees 6 healthy", func(ctx context.Context) (bool, string, error) {
		pdb, err := hostClient().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return pdb.Status.CurrentHealthy == 6, fmt.Sprintf("%d healthy", pdb.Status.CurrentHealthy), nil
	})

	lowest := watchMinReady(t, ns, app)
	t.Cleanup(func() { _, _ = kubectl(context.Background(), nil, "uncordon", cluster) })
	began := time.Now()
	// Other tests' pods on the node are theirs: the drain takes this
	// test's only.
	if out, err := kubectl(t.Context(), nil, "drain", cluster, "--ignore-daemonsets", "--delete-emptydir-data",
		"--pod-selector=app="+app, "--timeout=3m"); err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", cluster, err, out)
	}
	t.Logf("kubectl drain %s took %s", cluster, time.Since(began).Round(time.Millisecond))

	eventually(t, 2*time.Minute, "6 Ready off "+cluster+", none left there in the host or the member", func(ctx context.Context) (bool, string, error) {
		pods, err := appPods(ctx, ns, app)
		if err != nil {
			return false, err.Error(), nil
		}
		ready := 0
		var there []string
		for _, p := range pods {
			if p.Spec.NodeName == cluster {
				there = append(there, "host pod "+p.Name)
			} else if podReady(&p) && p.DeletionTimestamp == nil {
				ready++
			}
		}
		mp, err := memberClient(cluster).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, p := range mp.Items {
			there = append(there, "member pod "+p.Name)
		}
		return ready == 6 && len(there) == 0, fmt.Sprintf("%d Ready elsewhere; in %s: %v", ready, cluster, there), nil
	})
	if minReady := lowest(); minReady < 4 {
		t.Errorf("%d pods Ready at one point while draining, want at least 4 (the budget's minAvailable)", minReady)
	}
}

// TestQuotaCountsForwardedPods: forwarded pods are host pods, so a host
// namespace's ResourceQuota counts them and its LimitRange defaults their
// requests, which the member pods carry.
func TestQuotaCountsForwardedPods(t *testing.T) {
	const app = "quota"
	ns := namespace(t)
	create(t, hostClient().CoreV1().LimitRanges(ns).Create, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("150m"), corev1.ResourceMemory: resource.MustParse("96Mi")}}}},
	})
	create(t, hostClient().CoreV1().ResourceQuotas(ns).Create, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse("3"), corev1.ResourceRequestsCPU: resource.MustParse("2")}},
	})
	// Until the quota controller has computed its usage, the apiserver
	// refuses every pod of the namespace.
	eventually(t, time.Minute, "quota usage computed", func(ctx context.Context) (bool, string, error) {
		q, err := hostClient().CoreV1().ResourceQuotas(ns).Get(ctx, "team", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		_, ok := q.Status.Used[corev1.ResourcePods]
		return ok, fmt.Sprint(q.Status), nil
	})
	d := quickToGo(ns, app, 5)
	d.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	create(t, hostClient().AppsV1().Deployments(ns).Create, d)

	eventually(t, 2*time.Minute, "3 pods Ready in the clusters, the ReplicaSet refused the rest by the quota", func(ctx context.Context) (bool, string, error) {
		pods, err := appPods(ctx, ns, app)
		if err != nil {
			return false, err.Error(), nil
		}
		ready := 0
		for _, p := range pods {
			if podReady(&p) && slices.Contains(members, p.Spec.NodeName) {
				ready++
			}
		}
		rss, err := hostClient().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error(), nil
		}
		refused := ""
		for _, rs := range rss.Items {
			for _, c := range rs.Status.Conditions {
				if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue && strings.Contains(c.Message, "exceeded quota") {
					refused = c.Message
				}
			}
		}
		return ready == 3 && len(pods) == 3 && refused != "", fmt.Sprintf("%d pods, %d Ready in clusters, ReplicaFailure %q", len(pods), ready, refused), nil
	})
	events, err := namespaceEvents(t.Context(), ns, "FailedCreate")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(m string) bool { return strings.Contains(m, "exceeded quota: team") }) {
		t.Errorf("FailedCreate events %q: want one naming the quota", events)
	}
	q, err := hostClient().CoreV1().ResourceQuotas(ns).Get(t.Context(), "team", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if used := q.Status.Used[corev1.ResourceRequestsCPU]; used.Cmp(resource.MustParse("450m")) != 0 {
		t.Errorf("quota used requests.cpu %s, want 450m (3 pods of the LimitRange's 150m)", used.String())
	}

	pods, err := appPods(t.Context(), ns, app)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		m, err := memberPodOf(t.Context(), &pods[i])
		if err != nil || m == nil {
			t.Errorf("member pod of %s: %v %v", pods[i].Name, m, err)
			continue
		}
		got := m.Spec.Containers[0].Resources.Requests
		if got.Cpu().Cmp(resource.MustParse("150m")) != 0 || got.Memory().Cmp(resource.MustParse("96Mi")) != 0 {
			t.Errorf("member pod %s in %s requests %v, want the LimitRange's defaults cpu 150m, memory 96Mi", m.Name, pods[i].Spec.NodeName, got)
		}
	}
}

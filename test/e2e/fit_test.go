package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/testworld"
)

var gpuResource = corev1.ResourceName("nvidia.com/gpu")

// fill runs, directly in a member, one pod per node given that requests
// cpu there (bound by name, as the member's own workloads), and removes
// them when the test ends.
func fill(t *testing.T, member, cpu string, nodes ...string) {
	t.Helper()
	ctx := t.Context()
	ns := fmt.Sprintf("fill-%d", time.Now().UnixNano()%100000)
	c := memberClient(member)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	for _, n := range nodes {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "fill-" + n, Namespace: ns},
			Spec: corev1.PodSpec{NodeName: n, TerminationGracePeriodSeconds: ptr.To[int64](0), Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity(cpu)}}}}},
		}
		if _, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitModel waits until the virtual node of cluster publishes a model that
// satisfies cond.
func waitModel(t *testing.T, cluster, what string, cond func(*fit.Cluster) bool) {
	t.Helper()
	eventually(t, time.Minute, "virtual node "+cluster+": "+what, func(ctx context.Context) (bool, string, error) {
		n, err := hostClient().CoreV1().Nodes().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		c, err := fit.NewCluster(n)
		if err != nil || c.Model == nil {
			return false, fmt.Sprintf("model: %v", err), nil
		}
		return cond(c), n.Annotations[wellknown.FitModelAnnotation], nil
	})
}

// waitHolds waits until the virtual node of cluster publishes a model in
// which its member nodes hold exactly n replicas requesting cpu.
func waitHolds(t *testing.T, cluster, cpu string, n int64) {
	t.Helper()
	waitModel(t, cluster, fmt.Sprintf("nodes that hold %d replicas of %s cpu", n, cpu), func(c *fit.Cluster) bool {
		got, known := c.Replicas(demand(corev1.ResourceList{corev1.ResourceCPU: mustQuantity(cpu)}, nil))
		return known && got == n
	})
}

// demand is what a pod of these requests and this node selector asks.
func demand(requests corev1.ResourceList, selector map[string]string) fit.Demand {
	return fit.DemandOf(&corev1.Pod{Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: requests}}}}})
}

// eventsOf returns the messages of the events of reason on a host pod.
func eventsOf(ctx context.Context, ns, pod, reason string) ([]string, error) {
	list, err := hostClient().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out, nil
}

// namespaceEvents returns the distinct messages of the events of reason in ns.
func namespaceEvents(ctx context.Context, ns, reason string) ([]string, error) {
	list, err := hostClient().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		if !slices.Contains(out, e.Message) {
			out = append(out, e.Message)
		}
	}
	return out, nil
}

// bigPod is a pod template asking for cpu (and, when gpus > 0, GPUs)
// that tolerates the virtual nodes.
func bigPod(labels map[string]string, cpu string, gpus int64) corev1.PodTemplateSpec {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity(cpu), corev1.ResourceMemory: mustQuantity("64Mi")}}
	if gpus > 0 {
		res.Limits = corev1.ResourceList{gpuResource: mustQuantity(fmt.Sprint(gpus))}
		res.Requests[gpuResource] = mustQuantity(fmt.Sprint(gpus))
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Tolerations:                   []corev1.Toleration{virtualNodeToleration},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "main", Image: "trainer:1", Resources: res}},
		},
	}
}

// runningOn waits until the host pod matching selector runs, and returns it
// with its member pod.
func runningOn(t *testing.T, ns, selector string, timeout time.Duration) (host, member *corev1.Pod) {
	t.Helper()
	eventually(t, timeout, "a running pod "+selector, func(ctx context.Context) (bool, string, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for i := range pods.Items {
			p := &pods.Items[i]
			seen = append(seen, fmt.Sprintf("%s on %q: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Message))
			if p.DeletionTimestamp != nil || !podReady(p) {
				continue
			}
			m, err := memberPodOf(ctx, p)
			if err != nil || m == nil {
				continue
			}
			host, member = p, m
			return true, "", nil
		}
		return false, strings.Join(seen, "; "), nil
	})
	return host, member
}

// TestFragmentedClusterIsAvoided: beijing's nodes each have 12 cpu free
// (24 in sum); a 20-cpu pod that prefers beijing runs elsewhere within a
// minute, and says why it is not in beijing.
func TestFragmentedClusterIsAvoided(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	fill(t, "beijing", "20", "beijing-node-1", "beijing-node-2")
	waitModel(t, "beijing", "no node with 20 cpu free", func(c *fit.Cluster) bool {
		return !c.Check(demand(corev1.ResourceList{corev1.ResourceCPU: mustQuantity("20")}, nil)).Fits
	})
	labels := map[string]string{"app": "big"}
	tpl := bigPod(labels, "20", 0)
	tpl.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"beijing"}}}},
	}}}}
	create(t, hostClient().AppsV1().Deployments(ns).Create, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tpl},
	})
	host, _ := runningOn(t, ns, "app=big", time.Minute)
	if host.Spec.NodeName == "beijing" {
		t.Fatalf("the pod runs in beijing")
	}
	eventually(t, 30*time.Second, "an event on the pod saying why not beijing", func(ctx context.Context) (bool, string, error) {
		msgs, err := eventsOf(ctx, ns, host.Name, wellknown.EventLeftOut)
		if err != nil {
			return false, err.Error(), nil
		}
		// The largest free is 12 cpu, or less while a pod of an earlier
		// test still ends on a beijing node: the model counts a pod
		// until the member has removed it.
		for _, m := range msgs {
			_, rest, ok := strings.Cut(m, "beijing: no node with 20 cpu free (largest ")
			largest, _, _ := strings.Cut(rest, ")")
			if q, err := resource.ParseQuantity(largest); ok && err == nil && q.Sign() > 0 && q.Cmp(mustQuantity("12")) <= 0 {
				return true, "", nil
			}
		}
		return false, fmt.Sprint(msgs), nil
	})
}

// TestGPUOnlyOneNodeHas: one node of hangzhou has a GPU. A pod that needs
// it runs on that node; a second one waits in the host, saying what each
// cluster answered, and runs there once the first is gone.
func TestGPUOnlyOneNodeHas(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	hz := env.World.Member("hangzhou")
	if err := hz.AddNode(t.Context(), testworld.NodeSpec{Name: "hangzhou-gpu-1",
		Labels:      map[string]string{corev1.LabelTopologyRegion: "cn-east", corev1.LabelTopologyZone: "cn-east-1", "nvidia.com/gpu.product": "A100"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("8"), gpuResource: mustQuantity("1")}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hz.RemoveNode(context.Background(), "hangzhou-gpu-1") })
	waitModel(t, "hangzhou", "a node with a GPU", func(c *fit.Cluster) bool {
		return c.Check(demand(corev1.ResourceList{gpuResource: mustQuantity("1")}, nil)).Fits
	})

	bare := func(name string) *corev1.Pod {
		tpl := bigPod(map[string]string{"app": name}, "1", 1)
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tpl.Labels}, Spec: tpl.Spec}
	}
	create(t, hostClient().CoreV1().Pods(ns).Create, bare("train-1"))
	host, member := runningOn(t, ns, "app=train-1", time.Minute)
	if host.Spec.NodeName != "hangzhou" || member.Spec.NodeName != "hangzhou-gpu-1" {
		t.Fatalf("train-1 runs in %s on %s, want hangzhou-gpu-1 in hangzhou", host.Spec.NodeName, member.Spec.NodeName)
	}

	// The model follows the member a moment behind (train-1 bound there,
	// then the virtual node republished); a pod admitted in between is
	// judged on the older one, and the host scheduler's sum keeps it out.
	waitModel(t, "hangzhou", "its one GPU taken", func(c *fit.Cluster) bool {
		return !c.Check(demand(corev1.ResourceList{gpuResource: mustQuantity("1")}, nil)).Fits
	})
	create(t, hostClient().CoreV1().Pods(ns).Create, bare("train-2"))
	eventually(t, time.Minute, "train-2 waiting in the host with every cluster's answer", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "train-2", metav1.GetOptions{})
		if err != nil {
			return false, "", nil
		}
		if p.Spec.NodeName != "" {
			return false, "", fmt.Errorf("train-2 was bound to %s, whose only GPU is taken", p.Spec.NodeName)
		}
		msgs, err := eventsOf(ctx, ns, "train-2", wellknown.EventNoClusterFits)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, m := range msgs {
			if strings.Contains(m, "hangzhou: no node with 1 nvidia.com/gpu free (largest 0)") &&
				strings.Contains(m, "beijing: no node has nvidia.com/gpu") && strings.Contains(m, "shenzhen: no node has nvidia.com/gpu") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("events %q; gates %v, conditions %v, annotations %v", msgs, p.Spec.SchedulingGates, p.Status.Conditions, p.Annotations), nil
	})

	if err := hostClient().CoreV1().Pods(ns).Delete(t.Context(), "train-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	host, member = runningOn(t, ns, "app=train-2", 2*time.Minute)
	if host.Spec.NodeName != "hangzhou" || member.Spec.NodeName != "hangzhou-gpu-1" {
		t.Fatalf("train-2 runs in %s on %s, want hangzhou-gpu-1 in hangzhou", host.Spec.NodeName, member.Spec.NodeName)
	}
}

// TestLabelOnlyOneMemberNodeHas: disk=ssd on one node of shenzhen; a pod
// selecting it, which no virtual node's labels match, runs on that node.
func TestLabelOnlyOneMemberNodeHas(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	label := func(ctx context.Context, value *string) error {
		patch := `{"metadata":{"labels":{"disk":null}}}`
		if value != nil {
			patch = fmt.Sprintf(`{"metadata":{"labels":{"disk":%q}}}`, *value)
		}
		_, err := memberClient("shenzhen").CoreV1().Nodes().Patch(ctx, "shenzhen-node-2", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	if err := label(t.Context(), ptr.To("ssd")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = label(context.Background(), nil) })
	waitModel(t, "shenzhen", "a node with disk=ssd", func(c *fit.Cluster) bool {
		return c.Check(demand(nil, map[string]string{"disk": "ssd"})).Fits
	})

	tpl := bigPod(map[string]string{"app": "db"}, "1", 0)
	tpl.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	create(t, hostClient().CoreV1().Pods(ns).Create, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, Labels: tpl.Labels}, Spec: tpl.Spec})
	host, member := runningOn(t, ns, "app=db", time.Minute)
	if host.Spec.NodeName != "shenzhen" || member.Spec.NodeName != "shenzhen-node-2" {
		t.Fatalf("db runs in %s on %s, want shenzhen-node-2 in shenzhen", host.Spec.NodeName, member.Spec.NodeName)
	}
	if member.Spec.NodeSelector["disk"] != "ssd" {
		t.Errorf("the member pod's node selector is %v, want disk=ssd", member.Spec.NodeSelector)
	}
}

// TestPoliciesCountReplicasThatFit: dynamic weights and Aggregated divide
// by the replicas the member nodes really hold, not by free sums. Each
// replica asks 6 cpu of nodes with 32.
func TestPoliciesCountReplicasThatFit(t *testing.T) {
	startPolicy(t)
	policy := func(division string) string {
		return `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: by-capacity
spec:
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment, name: six}
  placement:
    clusterAffinity: {clusterNames: [beijing, hangzhou]}
    replicaScheduling:
      replicaSchedulingType: Divided
` + division
	}
	six := func(ns string, replicas int32) *appsv1.Deployment {
		d := plainDeployment(ns, "six", replicas)
		d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = mustQuantity("6")
		return d
	}
	t.Run("dynamic weights", func(t *testing.T) {
		// beijing: 5 cpu free on each node, 10 in sum: the sum says one
		// replica, the nodes none. hangzhou's nodes hold ten.
		ns := namespace(t)
		fill(t, "beijing", "27", "beijing-node-1", "beijing-node-2")
		waitHolds(t, "beijing", "6", 0)
		// An earlier test's pods may still be leaving hangzhou.
		waitModel(t, "hangzhou", "nodes that hold ten", func(c *fit.Cluster) bool {
			n, known := c.Replicas(demand(corev1.ResourceList{corev1.ResourceCPU: mustQuantity("6")}, nil))
			return known && n >= 10
		})
		applyYAML(t, ns, policy(`      replicaDivisionPreference: Weighted
      weightPreference: {dynamicWeight: AvailableReplicas}
`))
		create(t, hostClient().AppsV1().Deployments(ns).Create, six(ns, 10))
		waitSplit(t, ns, "six", map[string]int{"hangzhou": 10})
	})
	t.Run("aggregated", func(t *testing.T) {
		// The sums tie at six replicas each, so by name beijing would be
		// filled first; its nodes hold five (0 + 5), hangzhou's six (1 + 5).
		ns := namespace(t)
		fill(t, "beijing", "27", "beijing-node-1")
		fill(t, "hangzhou", "26", "hangzhou-node-1")
		waitHolds(t, "beijing", "6", 5)
		waitHolds(t, "hangzhou", "6", 6)
		applyYAML(t, ns, policy(`      replicaDivisionPreference: Aggregated
`))
		create(t, hostClient().AppsV1().Deployments(ns).Create, six(ns, 6))
		waitSplit(t, ns, "six", map[string]int{"hangzhou": 6})
	})
}

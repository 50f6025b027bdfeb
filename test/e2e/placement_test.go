package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// policyFor is a PropagationPolicy placing Deployment web with placement
// (YAML, indented under "placement:").
func policyFor(name, placement string) string {
	return fmt.Sprintf(`
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: %s
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  placement:
%s`, name, placement)
}

// requesting is a plainDeployment whose pods each request cpu.
func requesting(ns string, replicas int32, cpu string) *appsv1.Deployment {
	d := plainDeployment(ns, "web", replicas)
	d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	return d
}

// drained deletes, when the test ends, the pods of namespace ns and waits
// until they are gone, so that the capacity they held is free for the next
// test's placement (a namespace is otherwise deleted in the background).
func drained(t *testing.T, ns string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		apps := hostClient().AppsV1().Deployments(ns)
		_ = apps.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		pods := hostClient().CoreV1().Pods(ns)
		_ = pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			l, err := pods.List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, nil
		})
	})
}

// TestClusterSelection chooses clusters by name, label, field (region),
// exclusion and spread over regions, each Duplicated with one replica so
// that the clusters running a pod are the clusters chosen; and falls back
// to the next clusterAffinities group when the first cannot hold the
// replicas.
func TestClusterSelection(t *testing.T) {
	startPolicy(t)
	for name, tc := range map[string]struct {
		placement string
		want      map[string]int
	}{
		"labelSelector on the provider label": {`
    clusterAffinity:
      labelSelector:
        matchLabels: {flotilla.io/provider: aliyun}
`, map[string]int{"beijing": 1, "hangzhou": 1}},
		"fieldSelector region": {`
    clusterAffinity:
      fieldSelector:
        matchExpressions: [{key: region, operator: In, values: [cn-south, cn-east]}]
`, map[string]int{"hangzhou": 1, "shenzhen": 1}},
		"exclude": {`
    clusterAffinity:
      clusterNames: [beijing, hangzhou, shenzhen]
      exclude: [hangzhou]
`, map[string]int{"beijing": 1, "shenzhen": 1}},
		"spread over exactly two regions": {`
    clusterAffinity:
      clusterNames: [beijing, hangzhou, shenzhen]
    spreadConstraints:
    - spreadByField: region
      minGroups: 2
      maxGroups: 2
    - spreadByField: cluster
      minGroups: 2
      maxGroups: 2
`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			ns := namespace(t)
			applyYAML(t, ns, policyFor("web", tc.placement))
			create(t, hostClient().AppsV1().Deployments(ns).Create, plainDeployment(ns, "web", 1))
			if tc.want != nil {
				waitSplit(t, ns, "web", tc.want)
				return
			}
			eventually(t, 2*time.Minute, "web in two clusters of two regions", func(ctx context.Context) (bool, string, error) {
				got, all, err := clusterCounts(ctx, ns, "web")
				if err != nil {
					return false, err.Error(), nil
				}
				regions := map[string]bool{}
				for c, n := range got {
					if n != 1 {
						return false, fmt.Sprint(got), nil
					}
					regions[topology[c].region] = true
				}
				return len(got) == 2 && all == 2 && len(regions) == 2, fmt.Sprint(got), nil
			})
		})
	}
	t.Run("clusterAffinities fall back when the first group is full", func(t *testing.T) {
		ns := namespace(t)
		drained(t, ns)
		// beijing's two 32-CPU nodes hold two 30-CPU replicas, not three.
		// Every model must say so first: an earlier test's member pods
		// may still be leaving.
		for _, cluster := range []string{"beijing", "hangzhou", "shenzhen"} {
			waitHolds(t, cluster, "30", 2)
		}
		applyYAML(t, ns, policyFor("web", `
    clusterAffinities:
    - affinityName: primary
      clusterNames: [beijing]
    - affinityName: backup
      clusterNames: [hangzhou, shenzhen]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
`))
		create(t, hostClient().AppsV1().Deployments(ns).Create, requesting(ns, 3, "30"))
		eventually(t, 2*time.Minute, "three replicas in the backup group", func(ctx context.Context) (bool, string, error) {
			got, all, err := clusterCounts(ctx, ns, "web")
			if err != nil {
				return false, err.Error(), nil
			}
			return all == 3 && got["beijing"] == 0 && got["hangzhou"]+got["shenzhen"] == 3, fmt.Sprint(got), nil
		})
	})
}

// TestDynamicWeightsAndAggregated divides by the clusters' free capacity
// and packs into as few clusters as hold the replicas.
func TestDynamicWeightsAndAggregated(t *testing.T) {
	startPolicy(t)
	t.Run("Aggregated packs", func(t *testing.T) {
		ns := namespace(t)
		drained(t, ns)
		applyYAML(t, ns, policyFor("web", `
    clusterAffinity:
      clusterNames: [beijing, hangzhou, shenzhen]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Aggregated
`))
		// Each cluster's two 32-CPU nodes hold four 15-CPU replicas (with
		// room to spare for other tests' small pods): five need two
		// clusters. The models must say so first: an earlier test's
		// member pods may still be leaving after its host pods are gone.
		for _, cluster := range []string{"beijing", "hangzhou", "shenzhen"} {
			waitHolds(t, cluster, "15", 4)
		}
		create(t, hostClient().AppsV1().Deployments(ns).Create, requesting(ns, 5, "15"))
		eventually(t, 2*time.Minute, "five replicas packed 4+1", func(ctx context.Context) (bool, string, error) {
			got, all, err := clusterCounts(ctx, ns, "web")
			if err != nil {
				return false, err.Error(), nil
			}
			var sizes []int
			for _, n := range got {
				sizes = append(sizes, n)
			}
			return all == 5 && len(got) == 2 && (sizes[0] == 4 || sizes[1] == 4), fmt.Sprint(got), nil
		})
	})
	t.Run("dynamic weights follow free capacity", func(t *testing.T) {
		ns := namespace(t)
		drained(t, ns)
		// hangzhou has half its 64 CPUs taken: with 8-CPU replicas
		// beijing holds 8, hangzhou 4, so six replicas divide 4/2.
		filler := barePod(ns, "filler", "hangzhou")
		filler.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32")}
		create(t, hostClient().CoreV1().Pods(ns).Create, filler)
		waitPodReady(t, ns, filler.Name)
		// The weights are read once, when the replicas are placed: wait
		// until the models count the filler and no longer count the
		// Aggregated replicas, whose member pods leave after their host
		// pods.
		waitHolds(t, "beijing", "8", 8)
		waitHolds(t, "hangzhou", "8", 4)
		applyYAML(t, ns, policyFor("web", `
    clusterAffinity:
      clusterNames: [beijing, hangzhou]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        dynamicWeight: AvailableReplicas
`))
		create(t, hostClient().AppsV1().Deployments(ns).Create, requesting(ns, 6, "8"))
		waitSplit(t, ns, "web", map[string]int{"beijing": 4, "hangzhou": 2})
	})
}

// TestClusterTolerations: a cluster whose virtual node carries a taint
// gets a policy's replicas only when the policy tolerates it.
func TestClusterTolerations(t *testing.T) {
	startPolicy(t)
	const member = "shenzhen"
	cfg := filepath.Join(t.TempDir(), "gpu.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: flotilla.io/v1alpha1
kind: NodeConfig
virtualClusters:
- name: shenzhen
  provider: `+topology[member].provider+`
  namespaceMapping: SameName
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The node's settings all come from the file now.
	args := env.MemberArgs[member]
	env.MemberArgs[member] = nil
	if err := restartNode(t.Context(), member, "--config="+cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		env.MemberArgs[member] = args
		if err := restartNode(ctx, member); err != nil {
			t.Error(err)
		}
	})
	eventually(t, time.Minute, "shenzhen tainted", func(ctx context.Context) (bool, string, error) {
		n, err := hostClient().CoreV1().Nodes().Get(ctx, member, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == "dedicated" {
				return true, "", nil
			}
		}
		return false, fmt.Sprint(n.Spec.Taints), nil
	})
	for name, tc := range map[string]struct {
		tolerations string
		want        map[string]int
	}{
		"without the toleration": {"", map[string]int{"hangzhou": 1}},
		"with it": {`
    clusterTolerations:
    - {key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}
`, map[string]int{"hangzhou": 1, "shenzhen": 1}},
	} {
		t.Run(name, func(t *testing.T) {
			ns := namespace(t)
			applyYAML(t, ns, policyFor("web", `
    clusterAffinity:
      clusterNames: [hangzhou, shenzhen]
`+tc.tolerations))
			create(t, hostClient().AppsV1().Deployments(ns).Create, plainDeployment(ns, "web", 1))
			waitSplit(t, ns, "web", tc.want)
		})
	}
}

// TestDividedRollingUpdate rolls a Deployment divided 2:1 over two
// clusters to a new image: one rollout, whose maxUnavailable of 1 holds
// across both clusters, ending in the same split.
func TestDividedRollingUpdate(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	applyYAML(t, ns, policyFor("web", `
    clusterAffinity:
      clusterNames: [beijing, hangzhou]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - {targetCluster: {clusterNames: [beijing]}, weight: 2}
        - {targetCluster: {clusterNames: [hangzhou]}, weight: 1}
`))
	d := plainDeployment(ns, "web", 6)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0)),
	}}
	create(t, hostClient().AppsV1().Deployments(ns).Create, d)
	waitSplit(t, ns, "web", map[string]int{"beijing": 4, "hangzhou": 2})

	// Watch every pod while the rollout runs: never fewer than 5 Ready.
	lowest := watchMinReady(t, ns, "web")
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}`
	if _, err := hostClient().AppsV1().Deployments(ns).Patch(t.Context(), "web", "application/strategic-merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "rollout complete", func(ctx context.Context) (bool, string, error) {
		d, err := hostClient().AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.UpdatedReplicas == 6 && s.ReadyReplicas == 6 && s.Replicas == 6,
			fmt.Sprintf("%+v", s), nil
	})
	waitSplit(t, ns, "web", map[string]int{"beijing": 4, "hangzhou": 2})
	if minReady := lowest(); minReady < 5 {
		t.Errorf("%d pods Ready at one point of the rollout, want at least 5 (maxUnavailable 1 over both clusters)", minReady)
	}
	if !allNewImage(t, ns) {
		t.Error("pods of the old image remain")
	}
}

func allNewImage(t *testing.T, ns string) bool {
	pods, err := hostClient().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return false
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && !strings.HasSuffix(p.Spec.Containers[0].Image, ":1.28") {
			return false
		}
	}
	return true
}

// TestConvergence changes a Divided Deployment's weights from 2:1 to 1:2:
// flotilla-policy moves replicas one at a time, through evictions that
// honour the Deployment's PodDisruptionBudget, until the new split holds.
func TestConvergence(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	weights := func(beijing, hangzhou int) string {
		return policyFor("web", fmt.Sprintf(`
    clusterAffinity:
      clusterNames: [beijing, hangzhou]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - {targetCluster: {clusterNames: [beijing]}, weight: %d}
        - {targetCluster: {clusterNames: [hangzhou]}, weight: %d}
`, beijing, hangzhou))
	}
	applyYAML(t, ns, weights(2, 1))
	create(t, hostClient().AppsV1().Deployments(ns).Create, plainDeployment(ns, "web", 6))
	create(t, hostClient().PolicyV1().PodDisruptionBudgets(ns).Create, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(5)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	})
	waitSplit(t, ns, "web", map[string]int{"beijing": 4, "hangzhou": 2})

	lowest := watchMinReady(t, ns, "web")
	applyYAML(t, ns, weights(1, 2))
	waitSplit(t, ns, "web", map[string]int{"beijing": 2, "hangzhou": 4})
	waitEvent(t, ns, "web", corev1.EventTypeNormal, "Rebalanced", "Evicted pod")
	if minReady := lowest(); minReady < 5 {
		t.Errorf("%d pods Ready at one point while rebalancing, want at least 5 (the budget's minAvailable)", minReady)
	}
}

// watchMinReady watches the app's pods from now on; the function it
// returns stops watching and returns the fewest Ready, not terminating
// pods seen at any one time.
func watchMinReady(t *testing.T, ns, app string) func() int {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: "app=" + app}
	pods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), sel)
	if err != nil {
		t.Fatal(err)
	}
	sel.ResourceVersion = pods.ResourceVersion
	w, err := hostClient().CoreV1().Pods(ns).Watch(t.Context(), sel)
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	count := func() int {
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		return n
	}
	for i := range pods.Items {
		ready[pods.Items[i].Name] = podReady(&pods.Items[i]) && pods.Items[i].DeletionTimestamp == nil
	}
	lowest := count()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				ready[p.Name] = ev.Type != watch.Deleted && podReady(p) && p.DeletionTimestamp == nil
				lowest = min(lowest, count())
			}
		}
	}()
	return func() int {
		w.Stop()
		<-done
		return lowest
	}
}

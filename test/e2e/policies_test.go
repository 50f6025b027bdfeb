package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/apis/policy/v1alpha1/validation"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/fleet"
)

var (
	policyOnce      sync.Once
	policyErr       error
	policyBuildOnce sync.Once
	policyBuildErr  error
	policyBin       string
)

// startPolicy starts flotilla-policy in the host once, for the tests that
// use policies; the others run without its webhook.
func startPolicy(t *testing.T) {
	t.Helper()
	bin := policyBinary(t)
	policyOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// Rebalancing every 2 s rather than 10 keeps TestConvergence short.
		_, policyErr = env.StartPolicy(ctx, bin, "--rebalance-interval=2s")
	})
	if policyErr != nil {
		t.Fatal(policyErr)
	}
}

// policyBinary builds flotilla-policy once for the whole run.
func policyBinary(t *testing.T) string {
	t.Helper()
	policyBuildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		policyBin, policyBuildErr = fleet.BuildPolicy(ctx, env.World.Dir())
	})
	if policyBuildErr != nil {
		t.Fatal(policyBuildErr)
	}
	return policyBin
}

// plainDeployment is a Deployment as a user writes it for one cluster: no
// toleration of the virtual nodes, no idea of clusters; a policy places it.
func plainDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	d := deployment(ns, name, replicas)
	d.Spec.Template.Spec.Tolerations = nil
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	return d
}

func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := hostClient().AppsV1().Deployments(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// webTwoToOne is a Karmada PropagationPolicy whose apiVersion alone was
// changed: Deployment web divided 2:1 over beijing and hangzhou.
const webTwoToOne = `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: web-2-to-1
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  placement:
    clusterAffinity:
      clusterNames: [beijing, hangzhou]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - targetCluster:
            clusterNames: [beijing]
          weight: 2
        - targetCluster:
            clusterNames: [hangzhou]
          weight: 1
`

// TestStaticWeights divides a Deployment 2:1 over two clusters with a
// Karmada PropagationPolicy whose apiVersion alone was changed, and keeps
// the split as it scales up and down in one step each way.
func TestStaticWeights(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	applyYAML(t, ns, webTwoToOne)
	create(t, hostClient().AppsV1().Deployments(ns).Create, plainDeployment(ns, "web", 9))
	waitSplit(t, ns, "web", map[string]int{"beijing": 6, "hangzhou": 3})

	scale(t, ns, "web", 3)
	waitSplit(t, ns, "web", map[string]int{"beijing": 2, "hangzhou": 1})

	scale(t, ns, "web", 12)
	waitSplit(t, ns, "web", map[string]int{"beijing": 8, "hangzhou": 4})

	// The policy's status says where the template runs, target and actual.
	eventually(t, time.Minute, "policy status lists web at 8/4", func(ctx context.Context) (bool, string, error) {
		out, err := kubectl(ctx, nil, "get", "propagationpolicy", "web-2-to-1", "-n", ns,
			"-o", `jsonpath={range .status.templates[*].clusters[*]}{.name}={.desiredReplicas}/{.currentReplicas} {end}`)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.TrimSpace(out) == "beijing=8/8 hangzhou=4/4", out, nil
	})

	// Every pod records the policy that placed it.
	pods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if got := p.Annotations[wellknown.PlacementAnnotation]; got != "PropagationPolicy/"+ns+"/web-2-to-1" && p.DeletionTimestamp == nil {
			t.Errorf("pod %s placed by %q", p.Name, got)
		}
	}
}

// TestUnselectedPodsUntouched: a pod no policy selects is admitted as it
// is, with the policy webhook running.
func TestUnselectedPodsUntouched(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	pod := create(t, hostClient().CoreV1().Pods(ns).Create, barePod(ns, "loner", "shenzhen"))
	if pod.Spec.Affinity != nil {
		t.Errorf("unselected pod was given an affinity: %+v", pod.Spec.Affinity)
	}
	if _, ok := pod.Annotations[wellknown.PlacementAnnotation]; ok {
		t.Errorf("unselected pod annotated %v", pod.Annotations)
	}
	waitPodReady(t, ns, pod.Name)
}

// TestInvalidPolicies: policies a user gets wrong, or that use Karmada
// features flotilla does not have, are refused with a message naming the
// field — by the CRD schema where it can tell, by the policy webhook
// otherwise — and nothing is created.
func TestInvalidPolicies(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	for name, tc := range map[string]struct{ manifest, message string }{
		"unsupported Karmada field": {`
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: with-failover}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  failover:
    application: {decisionConditions: {tolerationSeconds: 60}}
`, `spec.failover: Forbidden: not supported by flotilla`},
		"weights on Duplicated": {`
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: duplicated-weights}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement:
    replicaScheduling:
      replicaSchedulingType: Duplicated
      weightPreference:
        staticWeightList: [{targetCluster: {clusterNames: [beijing]}, weight: 1}]
`, `spec.placement.replicaScheduling.weightPreference: Forbidden: only applies when replicaSchedulingType is Divided`},
		"unknown field": {`
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: typo}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement:
    clusterAfinity: {clusterNames: [beijing]}
`, `unknown field "spec.placement.clusterAfinity"`},
		"unknown operator": {`
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: bad-operator}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement:
    clusterAffinity:
      fieldSelector:
        matchExpressions: [{key: region, operator: Within, values: [cn-north]}]
`, `spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].operator: Unsupported value: "Within"`},
		"patch path not a JSON pointer": {`
apiVersion: policy.flotilla.io/v1alpha1
kind: OverridePolicy
metadata: {name: bad-path}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  overrideRules:
  - targetCluster: {clusterNames: [beijing]}
    overriders:
      plaintext: [{path: spec/template/spec/containers/0/image, operator: replace, value: nginx:1.28}]
`, `must be a JSON pointer such as /spec/containers/0/image`},
		"patch path no pod has": {`
apiVersion: policy.flotilla.io/v1alpha1
kind: OverridePolicy
metadata: {name: workload-path}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  overrideRules:
  - targetCluster: {clusterNames: [beijing]}
    overriders:
      plaintext: [{path: /spec/replicas, operator: replace, value: 3}]
`, `spec.overrideRules[0].overriders.plaintext[0].path: Invalid value: "/spec/replicas"`},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := kubectl(t.Context(), strings.NewReader(tc.manifest), "apply", "-n", ns, "-f", "-")
			if err == nil {
				t.Fatalf("accepted:\n%s", out)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("refused with\n%v\nwant a message containing\n%s", err, tc.message)
			}
		})
	}
	if out, err := kubectl(t.Context(), nil, "get", "propagationpolicies,overridepolicies", "-n", ns, "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("policies were created: %q %v", out, err)
	}
}

// TestPolicyWebhookUnavailable: while flotilla-policy is down, pods are
// still admitted (failurePolicy Ignore). A selected Deployment's pods wait
// Pending, untolerated by every virtual node, instead of running where the
// policy forbids; a pod no policy selects runs as usual. When
// flotilla-policy is back, the waiting pods are recreated and placed.
func TestPolicyWebhookUnavailable(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	applyYAML(t, ns, `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: web-in-shenzhen
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  placement:
    clusterAffinity:
      clusterNames: [shenzhen]
`)
	if err := env.Policy().Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := env.StartPolicy(ctx, policyBin, "--rebalance-interval=2s"); err != nil {
				t.Error(err)
			}
		}
	})

	create(t, hostClient().AppsV1().Deployments(ns).Create, plainDeployment(ns, "web", 2))
	other := create(t, hostClient().CoreV1().Pods(ns).Create, barePod(ns, "unselected", "beijing"))
	waitPodReady(t, ns, other.Name)
	eventually(t, time.Minute, "web's pods Pending, untolerated by the virtual nodes", func(ctx context.Context) (bool, string, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error(), nil
		}
		unschedulable := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				return false, "", fmt.Errorf("pod %s was bound to %s without its policy", p.Name, p.Spec.NodeName)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == "PodScheduled" && c.Status == "False" && strings.Contains(c.Message, "untolerated taint") {
					unschedulable++
				}
			}
		}
		return unschedulable == 2, fmt.Sprintf("%d of %d unschedulable", unschedulable, len(pods.Items)), nil
	})

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := env.StartPolicy(ctx, policyBin, "--rebalance-interval=2s"); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitSplit(t, ns, "web", map[string]int{"shenzhen": 2})
	waitEvent(t, ns, "web", corev1.EventTypeNormal, wellknown.EventUnplacedPodRecreated, "recreated through the placement webhook")
}

// TestUnplaceableTemplate: a policy that no cluster satisfies leaves the
// template's pods Pending — never running where the policy forbids — with
// a Warning event on the Deployment and the policy's Ready condition saying
// why.
func TestUnplaceableTemplate(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	applyYAML(t, ns, `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: web-nowhere
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  placement:
    clusterAffinity:
      labelSelector:
        matchLabels: {gpu: h100}
`)
	create(t, hostClient().AppsV1().Deployments(ns).Create, plainDeployment(ns, "web", 2))
	waitEvent(t, ns, "web", corev1.EventTypeWarning, wellknown.EventPlacementFailed, "PropagationPolicy/"+ns+"/web-nowhere cannot place it")
	eventually(t, time.Minute, "policy Ready=False saying why", func(ctx context.Context) (bool, string, error) {
		out, err := kubectl(ctx, nil, "get", "propagationpolicy", "web-nowhere", "-n", ns,
			"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}: {.status.conditions[?(@.type=="Ready")].message}`)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.HasPrefix(out, "False: Deployment/"+ns+"/web:"), out, nil
	})
	pods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s runs on %s although its policy places it nowhere", p.Name, p.Spec.NodeName)
		}
	}
	// Its waiting pods are left alone: recreating them would only churn.
	events, err := hostEvents(t.Context(), ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Reason == wellknown.EventUnplacedPodRecreated {
			t.Errorf("pods of an unplaceable template were recreated: %s", e.Message)
		}
	}
}

// TestDuplicated runs a Deployment's full replica count in each of three
// clusters: the template itself in the first, a copy per other cluster,
// owned by it and kept equal to it — scaling the template scales them all.
func TestDuplicated(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	applyYAML(t, ns, `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: web-everywhere
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  placement:
    clusterAffinity:
      clusterNames: [beijing, hangzhou, shenzhen]
    replicaScheduling:
      replicaSchedulingType: Duplicated
`)
	create(t, hostClient().AppsV1().Deployments(ns).Create, plainDeployment(ns, "web", 4))
	waitSplit(t, ns, "web", map[string]int{"beijing": 4, "hangzhou": 4, "shenzhen": 4})
	eventually(t, time.Minute, "kubectl get deployments: the template and one copy per other cluster", func(ctx context.Context) (bool, string, error) {
		out, err := kubectl(ctx, nil, "get", "deployments", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.readyReplicas} {end}`)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.TrimSpace(out) == "web=4 web-hangzhou=4 web-shenzhen=4", out, nil
	})
	scale(t, ns, "web", 2)
	waitSplit(t, ns, "web", map[string]int{"beijing": 2, "hangzhou": 2, "shenzhen": 2})
}

// TestPolicyDaemonSetRejected: a policy selecting a DaemonSet is refused
// with the reason and what to do instead (docs/policies.md); a DaemonSet
// that tolerates the virtual nodes still has its pods admitted and
// forwarded as themselves, one per cluster, untouched by any policy.
func TestPolicyDaemonSetRejected(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	_, err := kubectl(t.Context(), strings.NewReader(`
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: agents}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: DaemonSet, name: node-agent}]
`), "apply", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(err.Error(), validation.MsgDaemonSet) {
		t.Fatalf("a DaemonSet policy was not refused with %q: %v", validation.MsgDaemonSet, err)
	}

	labels := map[string]string{"app": "node-agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{virtualNodeToleration},
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
							Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: members,
						}}}},
					}}},
					Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}},
				},
			},
		},
	}
	create(t, hostClient().AppsV1().DaemonSets(ns).Create, ds)
	eventually(t, 2*time.Minute, "one running DaemonSet pod per cluster", func(ctx context.Context) (bool, string, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		running := map[string]int{}
		for i := range pods.Items {
			p := &pods.Items[i]
			if _, placed := p.Annotations[wellknown.PlacementAnnotation]; placed {
				return false, "", fmt.Errorf("pod %s was placed by a policy: %v", p.Name, p.Annotations)
			}
			if podReady(p) {
				running[p.Spec.NodeName]++
			}
		}
		for _, m := range members {
			if running[m] != 1 {
				return false, fmt.Sprintf("running per cluster: %v", running), nil
			}
		}
		return true, "", nil
	})
}

// TestScalingKeepsTheSplit: with static weights 2:1 a Deployment scaled
// 9 → 3 → 12 → 10 → 5 → 1 reaches 6/3, 2/1, 8/4, 7/3, 3/2 and 1/0 (Karmada's
// divisions), each scale-down by the ReplicaSet's own deletions alone: no
// pod is created on the way down and flotilla-policy evicts none
// (docs/policies.md, "in one step, from any size to any size"), also after
// a replica deleted out of turn at 12.
func TestScalingKeepsTheSplit(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	applyYAML(t, ns, webTwoToOne)
	uids := func() map[types.UID]bool {
		pods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[types.UID]bool{}
		for _, p := range pods.Items {
			out[p.UID] = true
		}
		return out
	}
	create(t, hostClient().AppsV1().Deployments(ns).Create, plainDeployment(ns, "web", 9))
	waitSplit(t, ns, "web", map[string]int{"beijing": 6, "hangzhou": 3})
	last := int32(9)
	for _, step := range []struct {
		replicas          int32
		beijing, hangzhou int
	}{{3, 2, 1}, {12, 8, 4}, {10, 7, 3}, {5, 3, 2}, {1, 1, 0}} {
		before := uids()
		logPods(t, ns, "app=web")
		scale(t, ns, "web", step.replicas)
		want := map[string]int{"beijing": step.beijing}
		if step.hangzhou > 0 {
			want["hangzhou"] = step.hangzhou
		}
		waitSplit(t, ns, "web", want)
		if step.replicas < last {
			for uid := range uids() {
				if !before[uid] {
					logPods(t, ns, "app=web")
					t.Errorf("scaling %d → %d created a pod: a replica was moved", last, step.replicas)
					break
				}
			}
		}
		events, err := hostClient().CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "reason=" + wellknown.EventRebalanced})
		if err != nil {
			t.Fatal(err)
		}
		if len(events.Items) > 0 {
			t.Fatalf("scaling %d → %d evicted pods: %s", last, step.replicas, events.Items[0].Message)
		}
		last = step.replicas
		if step.replicas == 12 {
			replaceOutOfTurn(t, ns, "beijing", "-4")
		}
	}
}

// replaceOutOfTurn deletes the pod of cluster whose pod-deletion-cost is
// cost — a replica deleted by hand, evicted or handed back, not the one a
// scale-down would pick — and waits for its replacement, which takes its
// rank: later scale-downs still keep the split.
func replaceOutOfTurn(t *testing.T, ns, cluster, cost string) {
	t.Helper()
	pods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	var victim *corev1.Pod
	counts := map[string]int{}
	for i := range pods.Items {
		p := &pods.Items[i]
		counts[p.Spec.NodeName]++
		if p.Spec.NodeName == cluster && p.Annotations[wellknown.DeletionCostAnnotation] == cost {
			victim = p
		}
	}
	if victim == nil {
		logPods(t, ns, "app=web")
		t.Fatalf("no pod in %s with pod-deletion-cost %s", cluster, cost)
	}
	if err := hostClient().CoreV1().Pods(ns).Delete(t.Context(), victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "pod "+victim.Name+" replaced", func(ctx context.Context) (bool, string, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, "", err
		}
		now := map[string]int{}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.UID == victim.UID {
				return false, "deleted pod still there", nil
			}
			if podReady(p) {
				now[p.Spec.NodeName]++
			}
		}
		return maps.Equal(now, counts), fmt.Sprintf("ready per cluster %v, want %v", now, counts), nil
	})
}

// logPods logs, for a failure's reader, where each pod runs and the cost
// its ReplicaSet deletes by.
func logPods(t *testing.T, ns, selector string) {
	t.Helper()
	pods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Logf("list pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s node=%s cost=%s ready=%v leaving=%v created=%s", p.Name, p.Spec.NodeName,
			p.Annotations[wellknown.DeletionCostAnnotation], podReady(&p), p.DeletionTimestamp != nil, p.CreationTimestamp.Format(time.RFC3339))
	}
}

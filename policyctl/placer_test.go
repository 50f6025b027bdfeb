package policyctl

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/wellknown"
)

func cpuSpec(cpu string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}
}

func cpuPod(name, node, template, cpu string) *corev1.Pod {
	spec := cpuSpec(cpu)
	spec.NodeName = node
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Annotations: map[string]string{wellknown.TemplateAnnotation: template}},
		Spec:       spec,
	}
}

// TestPlacementCountsPodsOnVirtualNodes checks the free capacity a decision
// sees: the pods bound to a virtual node use it, except the template's own
// (whose replicas are being placed again); pods on other nodes or not bound
// yet do not.
func TestPlacementCountsPodsOnVirtualNodes(t *testing.T) {
	cases := map[string]struct {
		pod  *corev1.Pod
		want string // the clusterAffinities group chosen
	}{
		"beijing full":                {cpuPod("other", "beijing", "other", "2"), "hangzhou"},
		"beijing full of its own":     {cpuPod("own", "beijing", "tpl", "2"), "beijing"},
		"a pod on a host node":        {cpuPod("host", "control-plane", "other", "2"), "beijing"},
		"a pod not bound":             {cpuPod("pending", "", "other", "2"), "beijing"},
		"beijing half used by others": {cpuPod("other", "beijing", "other", "1"), "beijing"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pol := &policyv1alpha1.PropagationPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "pol"},
				Spec: policyv1alpha1.PropagationSpec{
					ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
					Placement: policyv1alpha1.Placement{ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
						{AffinityName: "beijing", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"beijing"}}},
						{AffinityName: "hangzhou", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"hangzhou"}}},
					}},
				},
			}
			bj, hz := virtualNode("beijing"), virtualNode("hangzhou")
			bj.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("2")
			host := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "control-plane"},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}
			web := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "tpl"},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: cpuSpec("1")}},
			}
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(pol, bj, hz, host, web, tc.pod).
				WithIndex(&corev1.Pod{}, nodeIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
				Build()
			pl, err := newPlacer(c).placement(t.Context(), templateOf(web, "apps/v1", "Deployment"))
			if err != nil {
				t.Fatal(err)
			}
			if pl.decision.AffinityName != tc.want {
				t.Errorf("placed by group %q (%v), want %q", pl.decision.AffinityName, pl.clusters(), tc.want)
			}
		})
	}
}

// TestDecisionKey checks what recomputes a decision: the readiness or
// taints of a cluster the policy may use, and any cluster's labels; not the
// readiness of a cluster it cannot choose.
func TestDecisionKey(t *testing.T) {
	pol := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "pol", Generation: 1},
		Spec: policyv1alpha1.PropagationSpec{Placement: policyv1alpha1.Placement{
			ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"beijing"}}}}}
	c := candidate{pol, &pol.Spec}
	nodes := func(change func(bj, hz *corev1.Node)) []corev1.Node {
		bj, hz := virtualNode("beijing"), virtualNode("hangzhou")
		change(bj, hz)
		return []corev1.Node{*bj, *hz}
	}
	base := decisionKey(c, 3, nil, nodes(func(_, _ *corev1.Node) {}))
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	cases := map[string]struct {
		change  func(bj, hz *corev1.Node)
		changes bool
	}{
		"a chosen cluster turns NotReady": {func(bj, _ *corev1.Node) { notReady(bj) }, true},
		"a chosen cluster is cordoned":    {func(bj, _ *corev1.Node) { bj.Spec.Unschedulable = true }, true},
		"a chosen cluster gets a taint": {func(bj, _ *corev1.Node) {
			bj.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoSchedule}}
		}, true},
		"an unusable cluster turns NotReady": {func(_, hz *corev1.Node) { notReady(hz) }, false},
		"an unusable cluster gets a taint": {func(_, hz *corev1.Node) {
			hz.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoSchedule}}
		}, false},
		"an unusable cluster's labels change": {func(_, hz *corev1.Node) { hz.Labels["tier"] = "gold" }, true},
	}
	for name, tc := range cases {
		if got := decisionKey(c, 3, nil, nodes(tc.change)) != base; got != tc.changes {
			t.Errorf("%s: key changed = %v, want %v", name, got, tc.changes)
		}
	}
	if decisionKey(c, 4, nil, nodes(func(_, _ *corev1.Node) {})) == base {
		t.Error("a new replica count keeps the key")
	}
}

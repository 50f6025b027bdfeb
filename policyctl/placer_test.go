package policyctl

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

// TestPlacementCountsPodsOnVirtualNodes checks the free capacity a decision
// sees: the pods bound to a virtual node use it, except the template's own
// (whose replicas are being placed again); pods on other nodes or not bound
// yet do not.
func TestPlacementCountsPodsOnVirtualNodes(t *testing.T) {
	cases := map[string]struct {
		pod  *corev1.Pod
		want string // the clusterAffinities group chosen
	}{
		"beijing full":                {builder.Pod("other").Namespace("shop").Annotation(wellknown.TemplateAnnotation, "other").Node("beijing").CPU("2").Obj(), "hangzhou"},
		"beijing full of its own":     {builder.Pod("own").Namespace("shop").Annotation(wellknown.TemplateAnnotation, "tpl").Node("beijing").CPU("2").Obj(), "beijing"},
		"a pod on a host node":        {builder.Pod("host").Namespace("shop").Annotation(wellknown.TemplateAnnotation, "other").Node("control-plane").CPU("2").Obj(), "beijing"},
		"a pod not bound":             {builder.Pod("pending").Namespace("shop").Annotation(wellknown.TemplateAnnotation, "other").CPU("2").Obj(), "beijing"},
		"beijing half used by others": {builder.Pod("other").Namespace("shop").Annotation(wellknown.TemplateAnnotation, "other").Node("beijing").CPU("1").Obj(), "beijing"},
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
			bj := builder.VirtualNode("beijing").CPU("2").Pods("1000").Ready().Obj()
			hz := builder.VirtualNode("hangzhou").CPU("64").Pods("1000").Ready().Obj()
			host := builder.Node("control-plane").CPU("2").Obj()
			web := builder.Deployment("web").Namespace("shop").UID("tpl").Replicas(1).Template(builder.Pod("").CPU("1").Obj().Spec).Obj()
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
		bj := builder.VirtualNode("beijing").CPU("64").Pods("1000").Ready().Obj()
		hz := builder.VirtualNode("hangzhou").CPU("64").Pods("1000").Ready().Obj()
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

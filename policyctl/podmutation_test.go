package policyctl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/wellknown"
)

func TestPlace(t *testing.T) {
	in := func(clusters ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: clusters}
	}
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	zone := corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}
	ssd := corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}
	for name, tc := range map[string]struct {
		spec corev1.PodSpec
		p    podPlacement
		want corev1.PodSpec
		ann  map[string]string
	}{
		"duplicated: the clusters, the tolerations": {
			p: podPlacement{policy: "PropagationPolicy/web/p", template: "uid-1", clusters: []string{"beijing"}, tolerations: []corev1.Toleration{gpu}},
			want: corev1.PodSpec{
				Tolerations: []corev1.Toleration{virtualNodeToleration, gpu},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{in("beijing")}}}}}},
			},
			ann: map[string]string{wellknown.PlacementAnnotation: "PropagationPolicy/web/p", wellknown.TemplateAnnotation: "uid-1", wellknown.PolicyClusterAnnotation: "beijing"},
		},
		"divided: the one assigned cluster, ANDed into each of the pod's own terms": {
			spec: corev1.PodSpec{
				Tolerations: []corev1.Toleration{virtualNodeToleration},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{zone}}, {MatchExpressions: []corev1.NodeSelectorRequirement{ssd}}}}}},
			},
			p: podPlacement{policy: "ClusterPropagationPolicy/p", template: "uid-2", clusters: []string{"beijing", "hangzhou"},
				assigned: "hangzhou", assignmentID: "a1", deletionCost: -3},
			want: corev1.PodSpec{
				Tolerations: []corev1.Toleration{virtualNodeToleration},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{
						{MatchExpressions: []corev1.NodeSelectorRequirement{zone, in("hangzhou")}},
						{MatchExpressions: []corev1.NodeSelectorRequirement{ssd, in("hangzhou")}},
					}}}},
			},
			ann: map[string]string{wellknown.PlacementAnnotation: "ClusterPropagationPolicy/p", wellknown.TemplateAnnotation: "uid-2",
				wellknown.PolicyClusterAnnotation: "hangzhou", wellknown.AssignmentAnnotation: "a1", wellknown.DeletionCostAnnotation: "-3"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tc.spec}
			place(pod, tc.p)
			if diff := cmp.Diff(tc.want, pod.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ann, pod.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

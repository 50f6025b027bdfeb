// This file tests the confinement of pods to a partition.

package provider

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConfine(t *testing.T) {
	beijing := &metav1.LabelSelector{MatchLabels: map[string]string{"location": "beijing"}}
	withExpr := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"edge"}}}}
	affinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	in := func(k string, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: v}
	}
	cases := map[string]struct {
		spec    corev1.PodSpec
		sel     *metav1.LabelSelector
		want    corev1.PodSpec
		contrad bool
	}{
		"labels become nodeSelector": {
			spec: corev1.PodSpec{NodeSelector: map[string]string{"disk": "ssd"}},
			sel:  beijing,
			want: corev1.PodSpec{NodeSelector: map[string]string{"disk": "ssd", "location": "beijing"}},
		},
		"same label is fine": {
			spec: corev1.PodSpec{NodeSelector: map[string]string{"location": "beijing"}},
			sel:  beijing,
			want: corev1.PodSpec{NodeSelector: map[string]string{"location": "beijing"}},
		},
		"contradicting nodeSelector": {
			spec:    corev1.PodSpec{NodeSelector: map[string]string{"location": "hangzhou"}},
			sel:     beijing,
			contrad: true,
		},
		"impossible affinity terms are dropped, possible ones kept": {
			spec: corev1.PodSpec{Affinity: affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("location", "hangzhou")}},
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("gpu", "a100")}})},
			sel: beijing,
			want: corev1.PodSpec{NodeSelector: map[string]string{"location": "beijing"},
				Affinity: affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("gpu", "a100")}})},
		},
		"all affinity terms impossible": {
			spec:    corev1.PodSpec{Affinity: affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("location", "hangzhou")}})},
			sel:     beijing,
			contrad: true,
		},
		"expressions are ANDed into every term": {
			spec: corev1.PodSpec{Affinity: affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("gpu", "a100")}},
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("gpu", "h100")}})},
			sel: withExpr,
			want: corev1.PodSpec{NodeSelector: map[string]string{}, Affinity: affinity(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("gpu", "a100"), in("tier", "edge")}},
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("gpu", "h100"), in("tier", "edge")}})},
		},
		"expressions without affinity create one term": {
			sel:  withExpr,
			want: corev1.PodSpec{NodeSelector: map[string]string{}, Affinity: affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("tier", "edge")}})},
		},
		"no selector changes nothing": {
			spec: corev1.PodSpec{NodeSelector: map[string]string{"a": "b"}},
			want: corev1.PodSpec{NodeSelector: map[string]string{"a": "b"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tc.spec}
			err := Confine(pod, tc.sel)
			if tc.contrad {
				if !errors.Is(err, ErrContradiction) {
					t.Fatalf("err = %v, want a contradiction", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, pod.Spec); d != "" {
				t.Errorf("spec (-want +got):\n%s", d)
			}
		})
	}
}

package propagation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

func TestMayUse(t *testing.T) {
	bj := &Cluster{Name: "beijing", Labels: map[string]string{"tier": "gold"}}
	names := func(n ...string) *v1alpha1.ClusterAffinity { return &v1alpha1.ClusterAffinity{ClusterNames: n} }
	cases := map[string]struct {
		p    *v1alpha1.Placement
		want bool
	}{
		"no placement":          {nil, true},
		"no affinity":           {&v1alpha1.Placement{}, true},
		"named":                 {&v1alpha1.Placement{ClusterAffinity: names("beijing")}, true},
		"not named":             {&v1alpha1.Placement{ClusterAffinity: names("hangzhou")}, false},
		"excluded":              {&v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ExcludeClusters: []string{"beijing"}}}, false},
		"label matches":         {&v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}}, true},
		"label does not match":  {&v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "tin"}}}}, false},
		"invalid selector":      {&v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}}}, true},
		"second failover group": {&v1alpha1.Placement{ClusterAffinities: []v1alpha1.ClusterAffinityTerm{{AffinityName: "a", ClusterAffinity: *names("hangzhou")}, {AffinityName: "b", ClusterAffinity: *names("beijing")}}}, true},
		"in no failover group":  {&v1alpha1.Placement{ClusterAffinities: []v1alpha1.ClusterAffinityTerm{{AffinityName: "a", ClusterAffinity: *names("hangzhou")}}}, false},
	}
	for name, tc := range cases {
		if got := MayUse(tc.p, bj); got != tc.want {
			t.Errorf("%s: MayUse = %v, want %v", name, got, tc.want)
		}
	}
}

package override

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

func TestClusterFromNode(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "beijing", Labels: map[string]string{
		"flotilla.io/provider": "aliyun", "topology.kubernetes.io/region": "cn-north", "topology.kubernetes.io/zone": "cn-north-1a", "tier": "gold",
	}}}
	want := Cluster{Name: "beijing", Labels: n.Labels, Provider: "aliyun", Region: "cn-north", Zone: "cn-north-1a"}
	if diff := cmp.Diff(want, ClusterFromNode(n)); diff != "" {
		t.Errorf("cluster (-want +got):\n%s", diff)
	}
}

func TestClusterMatches(t *testing.T) {
	beijing := Cluster{Name: "beijing", Labels: map[string]string{"tier": "gold"}, Provider: "aliyun", Region: "cn-north", Zone: "cn-north-1a"}
	noZone := Cluster{Name: "edge", Region: "cn-north"}
	field := func(key v1alpha1.ClusterField, op v1alpha1.FieldSelectorOperator, values ...string) *v1alpha1.FieldSelector {
		return &v1alpha1.FieldSelector{MatchExpressions: []v1alpha1.FieldSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	cases := map[string]struct {
		cluster  Cluster
		affinity *v1alpha1.ClusterAffinity
		want     bool
	}{
		"nil matches all":   {beijing, nil, true},
		"empty matches all": {beijing, &v1alpha1.ClusterAffinity{}, true},
		"by name":           {beijing, &v1alpha1.ClusterAffinity{ClusterNames: []string{"hangzhou", "beijing"}}, true},
		"not by name":       {beijing, &v1alpha1.ClusterAffinity{ClusterNames: []string{"hangzhou"}}, false},
		"excluded wins over name": {beijing, &v1alpha1.ClusterAffinity{
			ClusterNames: []string{"beijing"}, ExcludeClusters: []string{"beijing"}}, false},
		"by labels":     {beijing, &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}, true},
		"not by labels": {beijing, &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "silver"}}}, false},
		"labels and name must both hold": {beijing, &v1alpha1.ClusterAffinity{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}, ClusterNames: []string{"hangzhou"}}, false},
		"invalid label selector matches none": {beijing, &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}}, false},
		"region In":          {beijing, &v1alpha1.ClusterAffinity{FieldSelector: field(v1alpha1.RegionField, v1alpha1.FieldSelectorOpIn, "cn-south", "cn-north")}, true},
		"region not In":      {beijing, &v1alpha1.ClusterAffinity{FieldSelector: field(v1alpha1.RegionField, v1alpha1.FieldSelectorOpIn, "cn-south")}, false},
		"provider NotIn":     {beijing, &v1alpha1.ClusterAffinity{FieldSelector: field(v1alpha1.ProviderField, v1alpha1.FieldSelectorOpNotIn, "aws")}, true},
		"zone NotIn":         {beijing, &v1alpha1.ClusterAffinity{FieldSelector: field(v1alpha1.ZoneField, v1alpha1.FieldSelectorOpNotIn, "cn-north-1a")}, false},
		"missing zone In":    {noZone, &v1alpha1.ClusterAffinity{FieldSelector: field(v1alpha1.ZoneField, v1alpha1.FieldSelectorOpIn, "")}, false},
		"missing zone NotIn": {noZone, &v1alpha1.ClusterAffinity{FieldSelector: field(v1alpha1.ZoneField, v1alpha1.FieldSelectorOpNotIn, "cn-north-1a")}, true},
		"unknown field":      {beijing, &v1alpha1.ClusterAffinity{FieldSelector: field("country", v1alpha1.FieldSelectorOpNotIn, "x")}, false},
		"unknown operator":   {beijing, &v1alpha1.ClusterAffinity{FieldSelector: field(v1alpha1.RegionField, "Exists")}, false},
		"field and name": {beijing, &v1alpha1.ClusterAffinity{
			FieldSelector: field(v1alpha1.RegionField, v1alpha1.FieldSelectorOpIn, "cn-north"), ClusterNames: []string{"beijing"}}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ClusterMatches(tc.cluster, tc.affinity); got != tc.want {
				t.Errorf("ClusterMatches = %v, want %v", got, tc.want)
			}
		})
	}
}

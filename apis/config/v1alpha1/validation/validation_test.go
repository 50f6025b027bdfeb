package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/apis/config/v1alpha1"
)

func sel(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

func partition(name, location string, port int32) v1alpha1.VirtualCluster {
	return v1alpha1.VirtualCluster{Name: name, NodeSelector: sel("location", location), NamespaceMapping: v1alpha1.Suffix, KubeletPort: port}
}

func TestValidateNodeConfig(t *testing.T) {
	cases := map[string]struct {
		vcs     []v1alpha1.VirtualCluster
		wantErr []string // substrings of the aggregate error; empty means valid
	}{
		"whole cluster": {vcs: []v1alpha1.VirtualCluster{{Name: "beijing", NamespaceMapping: v1alpha1.SameName, KubeletPort: 10250}}},
		"kubeedge partitions": {vcs: []v1alpha1.VirtualCluster{
			partition("ke-beijing-cluster", "beijing", 10250), partition("ke-hangzhou-cluster", "hangzhou", 10251)}},
		"custom taints": {vcs: []v1alpha1.VirtualCluster{{Name: "gpu", NamespaceMapping: v1alpha1.SameName, KubeletPort: 10250,
			Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}, {Key: "edge", Effect: corev1.TaintEffectNoExecute}}}}},
		"bad taint effect": {vcs: []v1alpha1.VirtualCluster{{Name: "a", NamespaceMapping: v1alpha1.SameName, KubeletPort: 10250,
			Taints: []corev1.Taint{{Key: "edge", Effect: "Sometimes"}}}},
			wantErr: []string{`virtualClusters[0].taints[0].effect: Unsupported value: "Sometimes"`}},
		"bad taint key": {vcs: []v1alpha1.VirtualCluster{{Name: "a", NamespaceMapping: v1alpha1.SameName, KubeletPort: 10250,
			Taints: []corev1.Taint{{Key: "no spaces", Effect: corev1.TaintEffectNoSchedule}}}},
			wantErr: []string{"virtualClusters[0].taints[0].key: Invalid value"}},
		"duplicate taint": {vcs: []v1alpha1.VirtualCluster{{Name: "a", NamespaceMapping: v1alpha1.SameName, KubeletPort: 10250,
			Taints: []corev1.Taint{{Key: "edge", Effect: corev1.TaintEffectNoSchedule}, {Key: "edge", Value: "x", Effect: corev1.TaintEffectNoSchedule}}}},
			wantErr: []string{"virtualClusters[0].taints[1]: Duplicate value", "also taints[0]"}},
		"bad label": {vcs: []v1alpha1.VirtualCluster{{Name: "a", NamespaceMapping: v1alpha1.SameName, KubeletPort: 10250,
			Labels: map[string]string{"tier": "not a value"}}},
			wantErr: []string{"virtualClusters[0].labels[tier]: Invalid value"}},
		"unknown mapping": {vcs: []v1alpha1.VirtualCluster{{Name: "a", NamespaceMapping: "Prefix", KubeletPort: 10250}},
			wantErr: []string{`virtualClusters[0].namespaceMapping: Unsupported value: "Prefix"`}},
		"port out of range": {vcs: []v1alpha1.VirtualCluster{{Name: "a", NamespaceMapping: v1alpha1.SameName, KubeletPort: 70000}},
			wantErr: []string{"virtualClusters[0].kubeletPort: Invalid value: 70000: must be a TCP port"}},
		"partitions sharing a port and names": {vcs: []v1alpha1.VirtualCluster{
			partition("a", "x", 10250), partition("a", "y", 10250)},
			wantErr: []string{"virtualClusters[1].name: Duplicate value", "virtualClusters[1].kubeletPort: Duplicate value"}},
		"name longer than a label value": {vcs: []v1alpha1.VirtualCluster{{Name: strings.Repeat("a", 64), NamespaceMapping: v1alpha1.SameName, KubeletPort: 10250}},
			wantErr: []string{"virtualClusters[0].name: Invalid value", "flotilla.io/cluster label: must be no more than 63 bytes"}},
		"a subdomain name of 63 characters": {vcs: []v1alpha1.VirtualCluster{{Name: "ke." + strings.Repeat("b", 60), NamespaceMapping: v1alpha1.SameName, KubeletPort: 10250}}},
		"partition without selector": {vcs: []v1alpha1.VirtualCluster{
			partition("a", "x", 10250), {Name: "b", NamespaceMapping: v1alpha1.Suffix, KubeletPort: 10251}},
			wantErr: []string{"virtualClusters[1].nodeSelector: Required value"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateNodeConfig(&v1alpha1.NodeConfig{VirtualClusters: tc.vcs}).ToAggregate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestEmptySelector(t *testing.T) {
	if !EmptySelector(nil) || !EmptySelector(&metav1.LabelSelector{}) {
		t.Error("nil and {} select every node")
	}
	if EmptySelector(sel("location", "beijing")) {
		t.Error("matchLabels is not empty")
	}
	if EmptySelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpExists}}}) {
		t.Error("matchExpressions is not empty")
	}
}

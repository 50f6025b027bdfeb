// This file tells which node features a pod needs that its clusters do
// not declare (Node Declared Features, Kubernetes 1.36 and later): the
// host scheduler only says that nodes "didn't match Pod's required
// features", not which features or why no cluster has them.

package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	ndftypes "k8s.io/component-helpers/nodedeclaredfeatures/types"

	"flotilla.io/flotilla/internal/wellknown"
)

// lacksFeatures is how the host scheduler's NodeDeclaredFeatures plugin
// counts the nodes it left out for not declaring a feature the pod needs
// (k8s.io/kubernetes pkg/scheduler/framework/plugins/nodedeclaredfeatures).
const lacksFeatures = "didn't match Pod's required features"

// firstFilteringVersion is the first Kubernetes version whose scheduler
// filters nodes on declared features; it stands in for a host version that
// cannot be read.
var firstFilteringVersion = version.MajorMinor(1, 36)

// NodeFeature is a node feature a pod needs and the clusters that declare
// it.
type NodeFeature struct {
	Name       string   `json:"name"`
	DeclaredBy []string `json:"declaredBy"`
}

// readNodeFeatures returns the node features pod needs, with the clusters
// declaring each, when the host scheduler left nodes out for not declaring
// them; nil otherwise, without reading anything.
func readNodeFeatures(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) ([]NodeFeature, error) {
	scheduled := condition(pod, corev1.PodScheduled)
	if pod.Spec.NodeName != "" || scheduled == nil || scheduled.Status != corev1.ConditionFalse || !strings.Contains(scheduled.Message, lacksFeatures) {
		return nil, nil
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: wellknown.TypeLabel + "=" + wellknown.TypeValue})
	if err != nil {
		return nil, fmt.Errorf("virtual nodes: %w", err)
	}
	host := firstFilteringVersion
	if v, err := c.Discovery().ServerVersion(); err == nil {
		if parsed, err := version.ParseGeneric(v.GitVersion); err == nil {
			host = parsed
		}
	}
	return nodeFeatures(pod, nodes.Items, host), nil
}

// nodeFeatures returns the features pod needs of its node as a host
// scheduler of version host infers them, with the virtual nodes (of nodes)
// that declare each.
func nodeFeatures(pod *corev1.Pod, nodes []corev1.Node, host *version.Version) []NodeFeature {
	needs, err := ndf.DefaultFramework.InferForPodScheduling(&ndftypes.PodInfo{Spec: &pod.Spec, Status: &pod.Status}, host)
	if err != nil {
		return nil
	}
	names, err := ndf.DefaultFramework.Unmap(needs)
	if err != nil {
		return nil
	}
	var out []NodeFeature
	for _, name := range names {
		f := NodeFeature{Name: name, DeclaredBy: []string{}}
		for _, n := range nodes {
			if cluster := n.Labels[wellknown.ClusterLabel]; cluster != "" && slices.Contains(n.Status.DeclaredFeatures, name) {
				f.DeclaredBy = append(f.DeclaredBy, cluster)
			}
		}
		slices.Sort(f.DeclaredBy)
		out = append(out, f)
	}
	return out
}

// undeclared are the names of the features that no cluster declares.
func undeclared(fs []NodeFeature) []string {
	var out []string
	for _, f := range fs {
		if len(f.DeclaredBy) == 0 {
			out = append(out, f.Name)
		}
	}
	return out
}

// featuresLine is the Node features line of explain's text.
func featuresLine(fs []NodeFeature) string {
	var parts []string
	for _, f := range fs {
		by := "no cluster"
		if len(f.DeclaredBy) > 0 {
			by = strings.Join(f.DeclaredBy, ", ")
		}
		parts = append(parts, f.Name+" (declared by "+by+")")
	}
	return strings.Join(parts, ", ")
}

// The virtual nodes as the broker sees them: which cluster a node is, and
// whether a cluster can import an export.

package servicebroker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	configv1alpha1 "flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/internal/wellknown"
)

// servedVersion is the value of wellknown.MultiClusterServicesAnnotation on
// a virtual node whose member serves the ServiceImport API the broker
// writes.
var servedVersion = mcsv1beta1.GroupVersion.Version

// clusters are the virtual nodes, by node name.
type clusters map[string]*corev1.Node

// listClusters reads the virtual nodes: the nodes labelled with a cluster.
func listClusters(ctx context.Context, c client.Reader) (clusters, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.HasLabels{wellknown.ClusterLabel}); err != nil {
		return nil, fmt.Errorf("list virtual nodes: %w", err)
	}
	out := clusters{}
	for i := range nodes.Items {
		out[nodes.Items[i].Name] = &nodes.Items[i]
	}
	return out, nil
}

// clusterOf names the cluster node stands for, as mcs.EndpointsByCluster
// asks.
func (cs clusters) clusterOf(node string) (string, bool) {
	n, ok := cs[node]
	if !ok {
		return "", false
	}
	c := n.Labels[wellknown.ClusterLabel]
	return c, c != ""
}

// importProblem is why one virtual node does not import an export.
type importProblem struct {
	node    string
	reason  string
	message string
}

// importProblems are the virtual nodes that cannot import an export in
// namespace, sorted by node name.
func (cs clusters) importProblems(namespace string) []importProblem {
	var out []importProblem
	for _, n := range cs {
		if p, ok := importProblemOf(n, namespace); ok {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b importProblem) int { return strings.Compare(a.node, b.node) })
	return out
}

// importProblemOf is why virtual node n does not import an export in
// namespace, if it does not.
func importProblemOf(n *corev1.Node, namespace string) (importProblem, bool) {
	if n.Annotations[wellknown.NamespaceMappingAnnotation] == string(configv1alpha1.Suffix) {
		return importProblem{node: n.Name, reason: wellknown.ReasonNamespaceNotSame, message: fmt.Sprintf(
			"virtual node %s maps namespace %s to %s-%s, which breaks the namespace sameness of Multi-Cluster Services, so the export is not imported there",
			n.Name, namespace, namespace, n.Name)}, true
	}
	if v, ok := n.Annotations[wellknown.MultiClusterServicesAnnotation]; ok && v != servedVersion {
		return importProblem{node: n.Name, reason: wellknown.ReasonImportUnavailable, message: fmt.Sprintf(
			"virtual node %s does not import Multi-Cluster Services %s: %q", n.Name, servedVersion, v)}, true
	}
	return importProblem{}, false
}

// This file holds what a virtual node declares of its member nodes'
// features (Node Declared Features, node.status.declaredFeatures): the
// host scheduler's NodeDeclaredFeatures plugin keeps a pod off a node that
// does not declare a feature the pod needs.

package clusternode

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/dranodeallocatableresources"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/draoptionalnodeoperations"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/extendwebsocketstokubelet"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/inplacepodresize"
)

// notDeclared are the features a virtual node never declares, whatever its
// member nodes do: they say what the node's own kubelet does with host
// objects, and the kubelet of a virtual node is flotilla-node, not the
// member's. Every other feature concerns how a pod runs, which the member
// does, so the virtual node passes it on.
var notDeclared = []string{
	// The host apiserver would proxy exec, attach and port-forward as
	// WebSockets straight to the node's kubelet endpoint, which
	// virtual-kubelet's API server cannot serve.
	extendwebsocketstokubelet.ExtendWebSocketsToKubeletFeatureGate,
	// The host's ResourceClaims and ResourceSlices are prepared and
	// accounted by the node's kubelet; flotilla-node neither forwards them
	// nor publishes devices of the member.
	dranodeallocatableresources.DRANodeAllocatableResourcesFeature,
	draoptionalnodeoperations.DRAOptionalNodeOperationsFeatureGate,
	// In-place resizes of a running host pod are not carried to its member
	// pod: without these the host refuses such a resize rather than
	// accepting one the member never applies.
	inplacepodresize.IPPRPodLevelResourcesFeatureGate,
	inplacepodresize.IPPRInitContainersFeatureGate,
	inplacepodresize.IPPRMemoryBackedVolumesFeatureGate,
}

// declaredFeatures returns, sorted and without duplicates (as the
// apiserver requires of node.status.declaredFeatures), the features that
// at least one of nodes declares, except notDeclared. The member scheduler
// then picks, among them, a node that declares what the pod needs. Nodes
// of a member older than Kubernetes 1.36 declare nothing, and neither does
// their virtual node: such a member cannot run a pod that needs a feature.
func declaredFeatures(nodes []*corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		for _, f := range n.Status.DeclaredFeatures {
			if !slices.Contains(notDeclared, f) && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return out
}

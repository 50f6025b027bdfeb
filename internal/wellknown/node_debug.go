// This file tells a node debugging pod (kubectl debug node/<node>) by the
// names kubectl gives it, and says why a virtual node refuses one.

package wellknown

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// kubectl debug node/<node> creates a pod named node-debugger-<node>-<5
// random characters>, labelled app.kubernetes.io/managed-by=kubectl-debug,
// bound to the node from the start (spec.nodeName), whatever its profile
// (host namespaces and the node's root directory come and go with it).
// kubectl debug of a pod (an ephemeral container, or a copy) makes no such
// pod, so these three together tell one apart.
const (
	// KubectlDebugManagedBy is the app.kubernetes.io/managed-by value of the
	// pods kubectl debug creates.
	KubectlDebugManagedBy = "kubectl-debug"
	// nodeDebuggerPrefix starts the name of a node debugging pod.
	nodeDebuggerPrefix = "node-debugger-"
)

// IsNodeDebugPod reports whether pod is one kubectl debug node/<node>
// made for the node it is bound to.
func IsNodeDebugPod(pod *corev1.Pod) bool {
	node := pod.Spec.NodeName
	return node != "" && pod.Labels["app.kubernetes.io/managed-by"] == KubectlDebugManagedBy &&
		strings.HasPrefix(pod.Name, nodeDebuggerPrefix+node+"-")
}

// NodeDebugRefusal is what a user who ran kubectl debug node/<node> on a
// virtual node is told: no one node stands behind it.
func NodeDebugRefusal(node string) string {
	return fmt.Sprintf("kubectl debug node/%[1]s is not supported: %[1]s is a flotilla virtual node, which stands for "+
		"the nodes of a member cluster, not for one machine; to debug one of them, run kubectl debug node/<node> "+
		"with the member cluster's kubeconfig", node)
}

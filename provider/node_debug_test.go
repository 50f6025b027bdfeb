// This file tests that a node debugging pod is refused.

package provider

import (
	"strings"
	"testing"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// TestNodeDebugPodRefused: kubectl debug node/<virtual node>'s pod is never
// forwarded; it fails with the reason, its container terminated with it,
// so that kubectl debug -it stops waiting.
func TestNodeDebugPodRefused(t *testing.T) {
	w := newHarness(t)
	name := "node-debugger-" + testNode + "-x7k2p"
	w.createHostPod(boundPod(name, func(p *corev1.Pod) {
		p.Labels = map[string]string{"app.kubernetes.io/managed-by": wellknown.KubectlDebugManagedBy}
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.HostPID, p.Spec.HostNetwork = true, true
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		p.Spec.Containers = []corev1.Container{{Name: "debugger", Image: "busybox", Stdin: true, TTY: true,
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
	}))
	w.eventually("node debugging pod failed with the reason", func() bool {
		p, err := w.getHostPod(name)
		if err != nil || p.Status.Phase != corev1.PodFailed || p.Status.Reason != wellknown.ReasonNodeDebugRefused ||
			len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			return false
		}
		return strings.Contains(p.Status.ContainerStatuses[0].State.Terminated.Message, "member cluster's kubeconfig")
	})
	w.eventually("NodeDebugRefused event on the pod", func() bool { return len(w.events.find(name, wellknown.ReasonNodeDebugRefused)) > 0 })
	if w.memberPodExists(testNamespace, name) {
		t.Error("node debugging pod forwarded to the member")
	}
	// kubectl debug -it reads the terminated container's logs next.
	w.eventually("the host pod cache sees the refusal", func() bool { return w.p.refused(testNamespace, name) != nil })
	_, err := w.p.GetContainerLogs(w.ctx, testNamespace, name, "debugger", api.ContainerLogOpts{})
	if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "member cluster's kubeconfig") {
		t.Errorf("logs of the refused pod: %v, want the refusal", err)
	}
}

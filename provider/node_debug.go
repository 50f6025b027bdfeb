// This file refuses node debugging pods (kubectl debug node/<virtual
// node>): no one node stands behind a virtual node.

package provider

import (
	"context"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/wellknown"
)

// refuseNodeDebugPod fails a node debugging pod (kubectl debug
// node/<virtual node>) with the reason, as a kubelet fails a pod it
// rejects at admission. flotilla-policy's pod webhook refuses such a pod
// before it is created, which kubectl prints at once; this is for a host
// without flotilla-policy (or whose webhook was unavailable: it fails
// open). No one node stands behind a virtual node, and forwarding the pod
// would run a privileged pod on whichever member node the member's
// scheduler picks, its hostPath "/" that node's.
//
// Its containers are marked terminated with the message too: kubectl
// debug -it waits for the container to run or terminate, and would wait
// for good on a pod that only failed.
func (p *Provider) refuseNodeDebugPod(ctx context.Context, host *corev1.Pod) {
	msg := wellknown.NodeDebugRefusal(p.cfg.NodeName)
	log.G(ctx).WithField("pod", host.Namespace+"/"+host.Name).Info("node debugging pod refused")
	p.cfg.Recorder.Event(host, corev1.EventTypeWarning, wellknown.ReasonNodeDebugRefused, msg)
	p.publish(host, NodeDebugRefusedStatus(host, msg, metav1.NewTime(p.cfg.Clock.Now())))
}

// NodeDebugRefusedStatus is the status of a refused node debugging pod:
// Failed with the message, and each container terminated with it.
func NodeDebugRefusedStatus(host *corev1.Pod, msg string, now metav1.Time) corev1.PodStatus {
	s := *host.Status.DeepCopy()
	s.Phase = corev1.PodFailed
	s.Reason = wellknown.ReasonNodeDebugRefused
	s.Message = msg
	s.ContainerStatuses = nil
	for _, c := range host.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: wellknown.ReasonNodeDebugRefused, Message: msg, StartedAt: now, FinishedAt: now,
			}},
		})
	}
	return s
}

// refused is the reason a host pod was refused (refuseNodeDebugPod), for
// the kubelet API to answer with: kubectl debug -it reads the logs of a
// debugging container that terminated, and without a member pod the
// member's answer would be a pod that is not found, not why.
func (p *Provider) refused(namespace, name string) error {
	host, err := p.hostPods.Pods(namespace).Get(name)
	if err != nil || host.Status.Reason != wellknown.ReasonNodeDebugRefused {
		return nil
	}
	return errdefs.InvalidInput(host.Status.Message)
}

// This file holds what a host pod shows while its member does not answer:
// not Ready, as the host's node controller marks the pods of a node whose
// kubelet went silent. A virtual node that reports itself NotReady is not
// silent, so the node controller leaves its pods alone; flotilla-node
// marks them itself.

package provider

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/translate"
)

// memberUnreachable reports whether the member fails its health checks.
func (p *Provider) memberUnreachable() bool {
	return p.cfg.MemberReachable != nil && !p.cfg.MemberReachable()
}

// MemberReachabilityChanged queues the status sync of every host pod of
// the virtual node: not Ready while the member does not answer, its member
// pod's status again once it does.
func (p *Provider) MemberReachabilityChanged() {
	hosts, _ := p.hostPods.List(labels.Everything())
	for _, host := range hosts {
		if host.Spec.NodeName == p.cfg.NodeName && !podstate.Terminal(host) {
			p.statusQueue.Add(host.Namespace + "/" + host.Name)
		}
	}
}

// unreachableStatus is host's status with its Ready and ContainersReady
// conditions False for an unreachable member, and whether that changes
// anything.
func unreachableStatus(host *corev1.Pod, cluster string) (corev1.PodStatus, bool) {
	status := *host.Status.DeepCopy()
	now := metav1.Now()
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if (c.Type != corev1.PodReady && c.Type != corev1.ContainersReady) || c.Status == corev1.ConditionFalse {
			continue
		}
		c.Status, c.LastTransitionTime = corev1.ConditionFalse, now
		c.Reason = wellknown.ReasonMemberUnreachable
		c.Message = fmt.Sprintf("cluster %s does not answer; what runs there is unknown", cluster)
	}
	return status, translate.StatusMatters(host.Status, status)
}

// This file holds the virtual node's verdict on the Kubernetes versions of
// its host and member (see wellknown.NodeKubernetesVersionSupported).

package clusternode

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"flotilla.io/flotilla/internal/kubeversion"
	"flotilla.io/flotilla/internal/wellknown"
)

// VersionCondition is the KubernetesVersionSupported condition of a
// virtual node whose host and member run v: True when both versions are
// in their supported ranges, False naming each that is not, Unknown while
// one has not been read. Its times are left for conditions to set.
func VersionCondition(v Versions) corev1.NodeCondition {
	host, member := kubeversion.Check(kubeversion.Host, v.Host), kubeversion.Check(kubeversion.Member, v.Member)
	c := corev1.NodeCondition{Type: wellknown.NodeKubernetesVersionSupported}
	switch {
	case host.Known && member.Known && host.Supported && member.Supported:
		c.Status, c.Reason = corev1.ConditionTrue, wellknown.ReasonSupportedVersions
		c.Message = fmt.Sprintf("host Kubernetes %s (supported: %s) and member Kubernetes %s (supported: %s) are supported",
			v.Host, kubeversion.Supported(kubeversion.Host), v.Member, kubeversion.Supported(kubeversion.Member))
	case host.Known && member.Known && !host.Supported && !member.Supported:
		c.Status, c.Reason = corev1.ConditionFalse, wellknown.ReasonUnsupportedVersions
		c.Message = unsupported(host) + "; " + unsupported(member)
	case host.Known && !host.Supported:
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, wellknown.ReasonUnsupportedHostVersion, unsupported(host)
	case member.Known && !member.Supported:
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, wellknown.ReasonUnsupportedMemberVersion, unsupported(member)
	default:
		c.Status, c.Reason = corev1.ConditionUnknown, wellknown.ReasonVersionUnknown
		c.Message = host.Message
		if !member.Known {
			c.Message = member.Message
		}
	}
	return c
}

// unsupported says which side's version is out of range, what to do, and
// that pods are forwarded anyway.
func unsupported(v kubeversion.Verdict) string {
	return fmt.Sprintf("the %s: %s; %s (pods are still forwarded)", v.Role, v.Message, v.Advice)
}

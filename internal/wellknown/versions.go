// The condition and events that say whether the Kubernetes versions of a
// host and its members are ones flotilla supports (package
// internal/kubeversion holds the range).

package wellknown

import corev1 "k8s.io/api/core/v1"

// NodeKubernetesVersionSupported is the virtual node's condition saying
// whether its member's and its host's Kubernetes versions are in the range
// flotilla supports: True when both are, False naming the one that is not,
// Unknown while a version could not be read. It is advice, not health:
// pods keep being forwarded either way, so it does not touch Ready and
// adds no taint.
const NodeKubernetesVersionSupported corev1.NodeConditionType = "KubernetesVersionSupported"

// Reasons of NodeKubernetesVersionSupported; those of False are also the
// reasons of the Warning Events that announce it, on the virtual node
// (flotilla-node) and, for the host alone, on the host's kube-system
// namespace (flotilla-policy).
const (
	// ReasonSupportedVersions: host and member versions are supported.
	ReasonSupportedVersions = "SupportedVersions"
	// ReasonUnsupportedMemberVersion: the member's version is outside
	// the supported member range.
	ReasonUnsupportedMemberVersion = "UnsupportedMemberVersion"
	// ReasonUnsupportedHostVersion: the host's version is outside the
	// supported host range.
	ReasonUnsupportedHostVersion = "UnsupportedHostVersion"
	// ReasonUnsupportedVersions: both are outside their ranges.
	ReasonUnsupportedVersions = "UnsupportedHostAndMemberVersions"
	// ReasonVersionUnknown: a version could not be read yet.
	ReasonVersionUnknown = "VersionUnknown"
)

package clusternode

import (
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/podfields"
	"flotilla.io/flotilla/internal/wellknown"
)

// Owner is the identity this virtual node stamps on what it forwards.
func (c Config) Owner() wellknown.Owner {
	return wellknown.Owner{Cluster: c.Name, Installation: c.Installation}
}

// Config describes one virtual node: which member nodes it stands for and
// how it presents itself to the host scheduler.
type Config struct {
	// Name is the virtual node's name, which is also its cluster name.
	Name string
	// Member is the member cluster's name (a partition's differs from it)
	// and Mode how flotilla-node reaches it, push or pull; both are
	// published on the node when set.
	Member, Mode string
	// NamespaceMapping, when set, is published on the node: SameName or
	// Suffix.
	NamespaceMapping string
	// MultiClusterServices, when set, is published on the node: the
	// Multi-Cluster Services API version the member serves, or why it
	// cannot import exported Services (wellknown.MultiClusterServicesAnnotation).
	MultiClusterServices string
	// Installation identifies the host cluster (see wellknown.InstallationLabel).
	Installation string
	// Selector picks the member nodes this virtual node stands for; nil means all.
	Selector labels.Selector
	// Labels are extra labels for the virtual node.
	Labels map[string]string
	// Taints replace the default virtual node taint when non-nil.
	Taints []corev1.Taint
	// Region, Zone and Provider, when set, become the topology labels and the
	// flotilla.io/provider label, overriding whatever the member nodes say.
	Region, Zone, Provider string
	// InternalIP is the address the host apiserver uses to reach the kubelet
	// endpoint. It must not be a loopback address: the apiserver refuses to
	// proxy there.
	InternalIP string
	// KubeletPort is the port of the kubelet endpoint.
	KubeletPort int32
	// KubeletVersion is shown as the node's version when the snapshot
	// carries no member version.
	KubeletVersion string
	// Grow, when not nil, says the cluster's autoscaler can add nodes: of
	// these shapes, or when empty, like its largest node. The fit model
	// publishes them.
	Grow []fit.NodeShape
}

// DefaultTaints is the taint every virtual node carries unless configured
// otherwise, so that only pods that opt in leave the host.
func DefaultTaints() []corev1.Taint {
	return []corev1.Taint{{Key: wellknown.ProviderTaintKey, Value: wellknown.ProviderTaintValue, Effect: corev1.TaintEffectNoSchedule}}
}

// Snapshot is the member state a virtual node is computed from.
type Snapshot struct {
	Nodes []*corev1.Node
	// Usage is what the member's pods request of each node; when nil, it
	// is counted from Pods.
	Usage *fit.Usage
	Pods  []*corev1.Pod
	// Reachable is false when the member apiserver did not answer its last
	// health checks; Message then says why.
	Reachable bool
	Message   string
	// KubeletAPI, when probed, is whether the host apiserver reached the
	// kubelet endpoint in its last probes, and if not why.
	KubeletAPI *Probe
	// Versions, when set, are the Kubernetes versions of the host and the
	// member as last read: the member's is the node's version, and the
	// node's KubernetesVersionSupported condition says whether both are
	// ones flotilla supports.
	Versions *Versions
	// Fields is what the member's API knows of pods, published in the fit
	// model so that placement avoids a cluster that would lose a field.
	Fields podfields.MemberFields
}

// Versions are the GitVersions of the host's and the member's apiservers;
// empty when not read yet.
type Versions struct {
	Host, Member string
}

// Probe is the outcome of the last probes of something.
type Probe struct {
	// Done is false until the first probe.
	Done    bool
	OK      bool
	Message string
}

// uniformLabels are the node labels a virtual node copies when all of its
// eligible member nodes agree on their value, so host-level selectors on
// them keep working.
var uniformLabels = []string{
	corev1.LabelOSStable,
	corev1.LabelArchStable,
	corev1.LabelTopologyRegion,
	corev1.LabelTopologyZone,
}

// Build returns the virtual node for cfg and the member snapshot. prev, when
// given, is the node Build returned last time: condition transition times are
// kept from it when a condition did not change.
func Build(cfg Config, snap Snapshot, prev *corev1.Node, now time.Time) *corev1.Node {
	taints := cfg.Taints
	if taints == nil {
		taints = DefaultTaints()
	}
	// One pass over the member's nodes: with many partitions each build
	// sees every node of the member but keeps only its own slice.
	eligible := eligibleNodes(snap.Nodes, cfg.Selector)
	// The host scheduler already counts the pods this virtual node
	// forwarded; every other pod (the member's own, another installation's
	// or partition's) takes capacity from it.
	usage := snap.Usage
	if usage == nil {
		usage = fit.UsageOf(snap.Pods, ownerKey)
	}
	all, others := usedOn(eligible, usage, keyOf(cfg.Owner()))
	alloc := allocatable(eligible, others)
	model := fit.BuildFrom(eligible, func(node string) fit.NodeUse {
		// What this virtual node forwarded the host can preempt; the
		// member's scheduler, any pod of lower priority.
		return fit.NodeUse{All: all[node], Preemptible: usage.ByPriority(node, keyOf(cfg.Owner())), ByPriority: usage.AllByPriority(node)}
	}, cfg.Grow)
	model.Kubernetes, model.UnknownFields, model.DroppedFields = snap.Fields.Version, snap.Fields.Unknown, snap.Fields.Dropped
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   cfg.Name,
			Labels: nodeLabels(cfg, eligible),
			// The sum above is what the host scheduler counts; the model
			// is what its nodes really are, so placement can tell a pod
			// that fits the sum from one that fits a node (package fit).
			Annotations: map[string]string{wellknown.FitModelAnnotation: model.Encode()},
		},
		Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Phase:       corev1.NodeRunning,
			Capacity:    alloc.DeepCopy(),
			Allocatable: alloc,
			Conditions:  conditions(snap, prev, now),
			// What the member's nodes can run, so the host scheduler
			// keeps pods that need more elsewhere.
			DeclaredFeatures: declaredFeatures(eligible),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: cfg.InternalIP},
				{Type: corev1.NodeHostName, Address: cfg.Name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{
				KubeletEndpoint: corev1.DaemonEndpoint{Port: cfg.KubeletPort},
			},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: uniformOr(eligible, corev1.LabelOSStable, "linux"),
				Architecture:    uniformOr(eligible, corev1.LabelArchStable, "amd64"),
				KubeletVersion:  kubeletVersion(cfg, snap.Versions),
			},
		},
	}
	if cfg.Mode != "" {
		n.Annotations[wellknown.ModeAnnotation] = cfg.Mode
	}
	if cfg.NamespaceMapping != "" {
		n.Annotations[wellknown.NamespaceMappingAnnotation] = cfg.NamespaceMapping
	}
	if cfg.MultiClusterServices != "" {
		n.Annotations[wellknown.MultiClusterServicesAnnotation] = cfg.MultiClusterServices
	}
	return n
}

// nodeLabels returns the virtual node's labels; eligible are the member
// nodes it stands for.
func nodeLabels(cfg Config, eligible []*corev1.Node) map[string]string {
	l := map[string]string{}
	for _, key := range uniformLabels {
		if v, ok := uniformValue(eligible, key); ok {
			l[key] = v
		}
	}
	if cfg.Region != "" {
		l[corev1.LabelTopologyRegion] = cfg.Region
	}
	if cfg.Zone != "" {
		l[corev1.LabelTopologyZone] = cfg.Zone
	}
	if cfg.Provider != "" {
		l[wellknown.ProviderLabel] = cfg.Provider
	}
	maps.Copy(l, cfg.Labels)
	// The identity labels come last so configuration cannot break them.
	l[wellknown.TypeLabel] = wellknown.TypeValue
	l[wellknown.RoleLabel] = wellknown.RoleValue
	l[wellknown.HostnameLabel] = cfg.Name
	l[wellknown.ClusterLabel] = cfg.Name
	if cfg.Member != "" {
		l[wellknown.MemberLabel] = cfg.Member
	}
	return l
}

// uniformValue returns the value of key shared by all nodes, if there is at
// least one node and they all agree.
func uniformValue(nodes []*corev1.Node, key string) (string, bool) {
	value, seen := "", false
	for _, n := range nodes {
		v, ok := n.Labels[key]
		if !ok || (seen && v != value) {
			return "", false
		}
		value, seen = v, true
	}
	return value, seen
}

// uniformOr returns the value of key shared by all nodes, or def.
func uniformOr(nodes []*corev1.Node, key, def string) string {
	if v, ok := uniformValue(nodes, key); ok && v != "" {
		return v
	}
	return def
}

// kubeletVersion is the version the node shows: the member's, once read.
func kubeletVersion(cfg Config, v *Versions) string {
	if v != nil && v.Member != "" {
		return v.Member
	}
	return cfg.KubeletVersion
}

func conditions(snap Snapshot, prev *corev1.Node, now time.Time) []corev1.NodeCondition {
	ready := corev1.NodeCondition{
		Type:    corev1.NodeReady,
		Status:  corev1.ConditionTrue,
		Reason:  wellknown.ReasonMemberReachable,
		Message: "member cluster apiserver is reachable",
	}
	if !snap.Reachable {
		ready.Status = corev1.ConditionFalse
		ready.Reason = wellknown.ReasonMemberUnreachable
		ready.Message = fmt.Sprintf("member cluster apiserver is unreachable: %s", snap.Message)
	}
	conds := []corev1.NodeCondition{
		ready,
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: wellknown.ReasonMemberHasSufficientMemory},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: wellknown.ReasonMemberHasNoDiskPressure},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: wellknown.ReasonMemberHasSufficientPID},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: wellknown.ReasonMemberNetworkReady},
	}
	if snap.Versions != nil {
		conds = append(conds, VersionCondition(*snap.Versions))
	}
	if api := snap.KubeletAPI; api != nil {
		c := corev1.NodeCondition{Type: wellknown.NodeKubeletAPIUnreachable, Status: corev1.ConditionFalse, Reason: wellknown.ReasonKubeletAPIReachable,
			Message: "the host apiserver reaches this node's kubelet endpoint (logs, exec, attach, port-forward, stats)"}
		switch {
		case !api.Done:
			c.Status, c.Reason = corev1.ConditionUnknown, wellknown.ReasonKubeletAPINotProbedYet
			c.Message = "the kubelet endpoint has not been probed through the host apiserver yet"
		case !api.OK:
			c.Status, c.Reason = corev1.ConditionTrue, wellknown.ReasonKubeletAPIProbeFailed
			c.Message = "the host apiserver cannot reach this node's kubelet endpoint, so kubectl logs, exec, attach, port-forward and top fail for its pods (they keep running): " + api.Message
		}
		conds = append(conds, c)
	}
	t := metav1.NewTime(now)
	for i := range conds {
		conds[i].LastHeartbeatTime = t
		conds[i].LastTransitionTime = t
		if prev == nil {
			continue
		}
		for _, pc := range prev.Status.Conditions {
			if pc.Type == conds[i].Type && pc.Status == conds[i].Status {
				conds[i].LastTransitionTime = pc.LastTransitionTime
			}
		}
	}
	return conds
}

package translate

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podspec"
	"flotilla.io/flotilla/internal/wellknown"
)

// Target says where a host pod goes: the virtual node (cluster) it was bound
// to and the member namespace its host namespace maps to.
type Target struct {
	Cluster   string
	Namespace string
	// Installation identifies the host cluster, see wellknown.InstallationLabel.
	Installation string
}

// Owner is the identity the target's member objects carry.
func (t Target) Owner() wellknown.Owner {
	return wellknown.Owner{Cluster: t.Cluster, Installation: t.Installation}
}

// ToMember returns the pod to create in the member for a host pod bound to
// target.Cluster. What changes, and why:
//
//   - metadata: same name, mapped namespace; labels and annotations are kept
//     and the identity (cluster, installation, host UID, host namespace and
//     name) is added
//     so the member pod can be found and adopted again after a restart.
//     Owner references, finalizers and server-set fields are dropped: the
//     host objects they name do not exist in the member.
//   - spec.nodeName is cleared: the host chose the cluster, the member's own
//     scheduler chooses the node.
//   - scheduling terms that only make sense in the host are removed:
//     nodeSelector entries and node affinity expressions on flotilla.io/ keys,
//     on the virtual node's hostname and on type=virtual-kubelet /
//     kubernetes.io/role=agent, node affinity matchFields (they name host
//     nodes), the virtual node toleration, and topology spread constraints
//     whose topology key only exists on virtual nodes. A required node
//     affinity term that loses all its expressions was satisfied by the host
//     choosing this cluster, so the whole required affinity is dropped.
//     Everything else reaches the member scheduler unchanged.
//   - spec.priority and spec.preemptionPolicy are cleared so the member's
//     admission resolves them from priorityClassName against its own classes
//     (the provider copies the host's class there when the member lacks it).
//   - the service-account token volume the host injected (kube-api-access-*)
//     is removed, so the member injects a token its own apiserver accepts.
//   - ephemeral containers are dropped: they cannot be set on create, and
//     are added through the member's ephemeralcontainers subresource
//     (EphemeralToMember).
//   - a generic ephemeral volume becomes a reference to its claim, which
//     the host made (<pod>-<volume>) and flotilla copies into the member
//     (mirror/claim.go): the member must not make a second one.
//   - status is cleared.
func ToMember(host *corev1.Pod, t Target) *corev1.Pod {
	m := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        host.Name,
			Namespace:   t.Namespace,
			Labels:      maps.Clone(host.Labels),
			Annotations: maps.Clone(host.Annotations),
		},
		Spec: *host.Spec.DeepCopy(),
	}
	m.Labels = t.Owner().Stamp(m.Labels)
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Labels[wellknown.HostUIDLabel] = string(host.UID)
	m.Annotations[wellknown.HostNamespaceAnnotation] = host.Namespace
	m.Annotations[wellknown.HostNameAnnotation] = host.Name

	s := &m.Spec
	// Placement may have replaced the pod's node constraints, in the
	// host, by the clusters that can run it; the member gets the pod's own.
	if mc, ok, err := fit.MemberConstraintsOf(host); err == nil && ok {
		mc.Restore(s)
		delete(m.Annotations, wellknown.MemberConstraintsAnnotation)
	}
	s.NodeName = ""
	s.Priority = nil
	s.PreemptionPolicy = nil
	s.EphemeralContainers = nil
	s.NodeSelector = filterSelector(s.NodeSelector, t.Cluster)
	s.Tolerations = filterTolerations(s.Tolerations)
	s.TopologySpreadConstraints = filterSpread(s.TopologySpreadConstraints)
	if s.Affinity != nil && s.Affinity.NodeAffinity != nil {
		s.Affinity.NodeAffinity = filterNodeAffinity(s.Affinity.NodeAffinity, t.Cluster)
		if s.Affinity.NodeAffinity == nil && s.Affinity.PodAffinity == nil && s.Affinity.PodAntiAffinity == nil {
			s.Affinity = nil
		}
	}
	podspec.DropServiceAccountToken(s)
	for i := range s.Volumes {
		if v := &s.Volumes[i]; v.Ephemeral != nil {
			v.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: host.Name + "-" + v.Name}}
		}
	}
	return m
}

// EphemeralToMember returns the ephemeral containers of a host pod as its
// member pod carries them. They are translated as ToMember translates
// containers: kept as they are (images, commands, environment, the volumes
// they mount and targetContainerName keep their names, since Secrets,
// ConfigMaps and claims are mirrored under theirs), but for mounts of the
// service-account token volume the host injected, which the member pod
// does not have.
func EphemeralToMember(host *corev1.Pod) []corev1.EphemeralContainer {
	if len(host.Spec.EphemeralContainers) == 0 {
		return nil
	}
	s := corev1.PodSpec{Volumes: host.Spec.Volumes}
	for i := range host.Spec.EphemeralContainers {
		s.EphemeralContainers = append(s.EphemeralContainers, *host.Spec.EphemeralContainers[i].DeepCopy())
	}
	podspec.DropServiceAccountToken(&s)
	return s.EphemeralContainers
}

// MissingEphemeral returns the containers of want whose names have is
// missing: ephemeral containers can be added, never changed or removed,
// so a name is all that tells whether one was added.
func MissingEphemeral(have, want []corev1.EphemeralContainer) []corev1.EphemeralContainer {
	var out []corev1.EphemeralContainer
	for _, c := range want {
		if !slices.ContainsFunc(have, func(h corev1.EphemeralContainer) bool { return h.Name == c.Name }) {
			out = append(out, c)
		}
	}
	return out
}

func filterSelector(sel map[string]string, cluster string) map[string]string {
	var out map[string]string
	for k, v := range sel {
		if wellknown.HostOnlyLabel(k, v, cluster) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

func filterTolerations(ts []corev1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		if !wellknown.HostOnlyToleration(t.Key) {
			out = append(out, t)
		}
	}
	return out
}

func filterSpread(cs []corev1.TopologySpreadConstraint) []corev1.TopologySpreadConstraint {
	var out []corev1.TopologySpreadConstraint
	for _, c := range cs {
		if !wellknown.HostOnlyKey(c.TopologyKey) {
			out = append(out, c)
		}
	}
	return out
}

// filterTerm removes host-only expressions and all matchFields from a node
// selector term and reports whether anything is left of it.
func filterTerm(term corev1.NodeSelectorTerm, cluster string) (corev1.NodeSelectorTerm, bool) {
	var exprs []corev1.NodeSelectorRequirement
	for _, e := range term.MatchExpressions {
		if hostOnlyRequirement(e, cluster) {
			continue
		}
		exprs = append(exprs, e)
	}
	return corev1.NodeSelectorTerm{MatchExpressions: exprs}, len(exprs) > 0
}

func hostOnlyRequirement(e corev1.NodeSelectorRequirement, cluster string) bool {
	if wellknown.HostOnlyKey(e.Key) {
		return true
	}
	if e.Operator != corev1.NodeSelectorOpIn {
		return false
	}
	for _, v := range e.Values {
		if !wellknown.HostOnlyLabel(e.Key, v, cluster) {
			return false
		}
	}
	return len(e.Values) > 0
}

func filterNodeAffinity(na *corev1.NodeAffinity, cluster string) *corev1.NodeAffinity {
	out := &corev1.NodeAffinity{}
	if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		var terms []corev1.NodeSelectorTerm
		unconstrained := false
		for _, term := range req.NodeSelectorTerms {
			ft, ok := filterTerm(term, cluster)
			if !ok {
				// This term only constrained the choice of virtual node and the
				// host scheduler satisfied it; terms are ORed, so the member is free.
				unconstrained = true
				break
			}
			terms = append(terms, ft)
		}
		if !unconstrained && len(terms) > 0 {
			out.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
		}
	}
	for _, pref := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		if ft, ok := filterTerm(pref.Preference, cluster); ok {
			out.PreferredDuringSchedulingIgnoredDuringExecution = append(out.PreferredDuringSchedulingIgnoredDuringExecution,
				corev1.PreferredSchedulingTerm{Weight: pref.Weight, Preference: ft})
		}
	}
	if out.RequiredDuringSchedulingIgnoredDuringExecution == nil && len(out.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return nil
	}
	return out
}

// identityKeys are what ToMember adds to metadata; HostView removes them again.
func stripIdentity(labels, annotations map[string]string) (map[string]string, map[string]string) {
	l, a := maps.Clone(labels), maps.Clone(annotations)
	for k := range (wellknown.Owner{}).Labels() {
		delete(l, k)
	}
	delete(l, wellknown.HostUIDLabel)
	delete(a, wellknown.HostNamespaceAnnotation)
	delete(a, wellknown.HostNameAnnotation)
	return l, a
}

// HostView describes the member pod in host terms, for virtual-kubelet to
// compare with the host pod: the host pod with the fields that may change
// after creation (images, activeDeadlineSeconds, tolerations, labels,
// annotations) taken from the member, of its ephemeral containers only
// those the member pod has, and status translated by HostStatus.
// A difference tells virtual-kubelet that UpdatePod has work to do: an
// ephemeral container added in the host (kubectl debug) is one.
func HostView(host *corev1.Pod, member *memberpod.Pod, t Target) *corev1.Pod {
	v := host.DeepCopy()
	v.Labels, v.Annotations = stripIdentity(member.Labels, member.Annotations)
	if len(v.Labels) == 0 && len(host.Labels) == 0 {
		v.Labels = host.Labels
	}
	if len(v.Annotations) == 0 && len(host.Annotations) == 0 {
		v.Annotations = host.Annotations
	}
	CopyImages(v.Spec.Containers, member.Spec.Containers)
	CopyImages(v.Spec.InitContainers, member.Spec.InitContainers)
	v.Spec.ActiveDeadlineSeconds = member.Spec.ActiveDeadlineSeconds
	if len(MissingEphemeral(member.Spec.EphemeralContainers, v.Spec.EphemeralContainers)) > 0 {
		v.Spec.EphemeralContainers = slices.DeleteFunc(v.Spec.EphemeralContainers, func(c corev1.EphemeralContainer) bool {
			return !slices.ContainsFunc(member.Spec.EphemeralContainers, func(m corev1.EphemeralContainer) bool { return m.Name == c.Name })
		})
	}
	if want := ToMember(host, t).Spec.Tolerations; !equality.Semantic.DeepEqual(want, member.Spec.Tolerations) {
		v.Spec.Tolerations = member.Spec.Tolerations
	}
	v.Status = HostStatus(host, &member.Status)
	return v
}

// CopyImages sets the image of each container of dst to that of the
// container of src with its name: images are what a pod may change of
// its containers once created.
func CopyImages(dst, src []corev1.Container) {
	images := make(map[string]string, len(src))
	for _, c := range src {
		images[c.Name] = c.Image
	}
	for i := range dst {
		if img, ok := images[dst[i].Name]; ok {
			dst[i].Image = img
		}
	}
}

// HostStatus is the member pod's status as the host pod should show it. The
// member's phase, conditions, container statuses, IPs and start time are
// taken as they are; host conditions the member does not know (set by host
// controllers, e.g. DisruptionTarget) are kept; what only means something in
// the member (nominated node, resize state) is dropped; the QoS class stays
// the host's because it is immutable there.
func HostStatus(host *corev1.Pod, member *corev1.PodStatus) corev1.PodStatus {
	s := *member.DeepCopy()
	s.NominatedNodeName = ""
	s.Resize = ""
	s.QOSClass = host.Status.QOSClass
	s.ObservedGeneration = host.Generation
	known := map[corev1.PodConditionType]bool{}
	for i := range s.Conditions {
		known[s.Conditions[i].Type] = true
		if s.Conditions[i].ObservedGeneration != 0 {
			s.Conditions[i].ObservedGeneration = host.Generation
		}
	}
	for _, c := range host.Status.Conditions {
		if !known[c.Type] {
			s.Conditions = append(s.Conditions, c)
		}
	}
	if s.Phase == "" {
		s.Phase = corev1.PodPending
	}
	return s
}

// StatusMatters reports whether writing want over the host pod's current
// status would change something a user or a controller acts on. Timestamps
// of conditions whose status, reason and message are unchanged, the order of
// conditions, and an observed generation the host status has never carried
// do not count: the member's own PodScheduled condition and its first
// Pending status would otherwise each cost a host write per pod, as would
// every re-stamp of an unchanged condition. The next write that matters
// carries them along.
func StatusMatters(cur, want corev1.PodStatus) bool {
	if cur.ObservedGeneration == 0 {
		want.ObservedGeneration = 0
	}
	if !sameConditions(cur.Conditions, want.Conditions) {
		return true
	}
	cur.Conditions, want.Conditions = nil, nil
	return !equality.Semantic.DeepEqual(cur, want)
}

// SamePhaseAndConditions reports whether a and b have the same phase and
// the same conditions as sameConditions compares them: what writers other
// than a pod's kubelet change of its status (the node controller's Ready,
// an eviction's DisruptionTarget, the pod garbage collector's Failed). It
// compares in place, cheaply enough for every host pod event, where
// StatusMatters takes a reflective comparison.
func SamePhaseAndConditions(a, b *corev1.PodStatus) bool {
	return a.Phase == b.Phase && sameConditions(a.Conditions, b.Conditions)
}

// sameConditions reports whether a and b have conditions of the same types
// and, of each type, the same last one but for its times and observed
// generation. It runs on every member pod event, so it compares in place:
// a pod has a handful of conditions.
func sameConditions(a, b []corev1.PodCondition) bool {
	for _, x := range a {
		if !sameCondition(lastCondition(a, x.Type), lastCondition(b, x.Type)) {
			return false
		}
	}
	for _, y := range b {
		if lastCondition(a, y.Type) == nil {
			return false
		}
	}
	return true
}

func lastCondition(cs []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

func sameCondition(x, y *corev1.PodCondition) bool {
	if x == nil || y == nil {
		return x == y
	}
	a, b := *x, *y
	a.LastProbeTime, a.LastTransitionTime, a.ObservedGeneration = metav1.Time{}, metav1.Time{}, 0
	b.LastProbeTime, b.LastTransitionTime, b.ObservedGeneration = metav1.Time{}, metav1.Time{}, 0
	return a == b
}

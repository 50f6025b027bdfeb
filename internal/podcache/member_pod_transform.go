// This file holds the transform of the member caches: forwarded pods,
// the member's own pods, nodes, Services and claims.

package podcache

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podspec"
	"flotilla.io/flotilla/internal/wellknown"
)

// MemberPodTransform is the transform of the member pod informer of an
// installation (of every kind the member factory caches: nodes, see
// trimMemberNode; Services and claims of another owner keep only their
// identity, see identityMeta). It makes every pod a memberpod.Pod: its
// host UID label a field, so that a workload's pods share their labels,
// and of its spec only what flotilla reads, shared with the pods that
// have the same.
//
// A member pod of another owner (the member's own workloads, another
// installation's pods) keeps only what flotilla reads of it (see
// foreignPod): a member may run thousands of them, and flotilla-node
// caches every pod of its member. An adoption or a release reads the pod
// it writes from the apiserver, never from the cache. A pod the
// installation forwarded keeps its metadata and status and, of its spec
// (see trimMemberSpec):
//   - the node it runs on and the requests it holds there (containers'
//     and init containers' resources and restart policies, the pod's
//     overhead and resources), for the fit model;
//   - the fields a host pod may change after creation (container images,
//     active deadline, tolerations), for HostView;
//   - container names, for stats, and the restart policy;
//   - the references to the objects it uses (ServiceAccount, pull secrets,
//     Secret and ConfigMap references in env, envFrom and volumes), for
//     the dependency index.
//
// Everything else (mounts, probes, commands, security contexts, scheduling
// terms, plain env values) is dropped, and so is its host pod's name when
// it is its own (dropOwnHostName).
func MemberPodTransform(installation string) cache.TransformFunc {
	return MemberPodsTransform(installation, nil)
}

// MemberPodsTransform is MemberPodTransform for the member pod informer
// whose store cached returns (nil while there is none): a new version of
// a pod the installation forwarded shares with the version cached what
// did not change, as HostPodsTransform does for host pods.
func MemberPodsTransform(installation string, cached func() cache.Store) cache.TransformFunc {
	owned := func(l map[string]string) bool {
		return l[wellknown.InstallationLabel] == installation && l[wellknown.ClusterLabel] != ""
	}
	return func(obj any) (any, error) {
		obj, _ = StripManagedFields(obj)
		switch o := obj.(type) {
		case *corev1.Pod:
			if !owned(o.Labels) {
				return foreignPod(o), nil
			}
			// An adopted pod's cached version is trimmed as another owner's.
			prev := cachedMember(cached, o)
			if prev != nil && !owned(prev.Labels) {
				prev = nil
			}
			return forwardedPod(o, prev), nil
		case *corev1.Node:
			trimMemberNode(o)
		// The mirrors read the Services and claims of another owner only to
		// leave them alone: those keep their identity alone.
		case *corev1.Service:
			if !owned(o.Labels) {
				*o = corev1.Service{TypeMeta: o.TypeMeta, ObjectMeta: identityMeta(&o.ObjectMeta)}
			}
		case *corev1.PersistentVolumeClaim:
			if !owned(o.Labels) {
				*o = corev1.PersistentVolumeClaim{TypeMeta: o.TypeMeta, ObjectMeta: identityMeta(&o.ObjectMeta)}
			}
		}
		return obj, nil
	}
}

// memberSpecs holds the specs member pods keep, one per workload and node
// for most (see trimMemberSpec and foreignPod).
var memberSpecs = table[*corev1.PodSpec]{limit: 4096}

// forwardedPod is what the member pod cache keeps of pod, a pod the
// installation forwarded (see MemberPodTransform), whose cached version
// is prev (nil when none is): what did not change is prev's, and what
// pods share is shared.
func forwardedPod(pod *corev1.Pod, prev *memberpod.Pod) *memberpod.Pod {
	dropOwnHostName(pod)
	uid := takeHostUID(&pod.ObjectMeta)
	m := &memberpod.Pod{ObjectMeta: pod.ObjectMeta, HostUID: uid, Status: pod.Status}
	internStatus(&m.Status)
	if prev != nil && prev.UID != pod.UID {
		prev = nil
	}
	// The same generation on the same node is the same spec (sameSpec).
	if prev != nil && prev.Generation > 0 && prev.Generation == pod.Generation && prev.Spec.NodeName == pod.Spec.NodeName {
		m.Spec = prev.Spec
	} else {
		trimMemberSpec(&pod.Spec)
		m.Spec = internShared(&memberSpecs, &pod.Spec)
	}
	var pm *metav1.ObjectMeta
	if prev != nil {
		shareMeta(&m.ObjectMeta, &prev.ObjectMeta)
		pm = &prev.ObjectMeta
	}
	internMetaAfter(&m.ObjectMeta, pm, wellknown.HostNameAnnotation)
	return m
}

// takeHostUID takes the host UID label out of m's labels, which are the
// object's own (decoded for the cache), and returns its value.
func takeHostUID(m *metav1.ObjectMeta) types.UID {
	uid, ok := m.Labels[wellknown.HostUIDLabel]
	if !ok {
		return ""
	}
	delete(m.Labels, wellknown.HostUIDLabel)
	return types.UID(uid)
}

// dropOwnHostName leaves out of a forwarded member pod's annotations its
// host pod's name when it is the member pod's own, as it is unless the pod
// was adopted: then the annotations are those of the workload's other
// replicas, and one map serves them all. HostKeyOf reads the name back.
func dropOwnHostName(pod *corev1.Pod) {
	if n, ok := pod.Annotations[wellknown.HostNameAnnotation]; ok && n == pod.Name {
		delete(pod.Annotations, wellknown.HostNameAnnotation)
	}
}

// HostKeyOf is the namespace and name of the host pod that m, a member
// pod, stands for, from its annotations (see dropOwnHostName); empty for a
// member pod that names no host namespace.
func HostKeyOf(m *memberpod.Pod) (namespace, name string) {
	namespace = m.Annotations[wellknown.HostNamespaceAnnotation]
	if namespace == "" {
		return "", ""
	}
	if n, ok := m.Annotations[wellknown.HostNameAnnotation]; ok {
		return namespace, n
	}
	return namespace, m.Name
}

// trimMemberSpec is what MemberPodTransform keeps of the spec of a pod the
// installation forwarded.
func trimMemberSpec(s *corev1.PodSpec) {
	*s = corev1.PodSpec{
		Volumes:               referenceVolumes(s.Volumes),
		InitContainers:        readContainers(s.InitContainers),
		Containers:            readContainers(s.Containers),
		EphemeralContainers:   readEphemeralContainers(s.EphemeralContainers),
		RestartPolicy:         s.RestartPolicy,
		ActiveDeadlineSeconds: s.ActiveDeadlineSeconds,
		ServiceAccountName:    s.ServiceAccountName,
		NodeName:              s.NodeName,
		ImagePullSecrets:      s.ImagePullSecrets,
		Tolerations:           s.Tolerations,
		Priority:              s.Priority,
		PriorityClassName:     s.PriorityClassName,
		Overhead:              s.Overhead,
		Resources:             s.Resources,
	}
	internSpec(s)
}

// foreignPod is what MemberPodTransform keeps of a member pod the
// installation did not forward:
//   - its name, namespace, UID, generation, labels and deletion: the
//     labels tell whose pod it is (a host pod's namesake is refused, not
//     taken over; another installation's pods are grouped by owner);
//   - its node, its phase and what it requests there (containers' and
//     init containers' requests and restart policies, the pod's overhead
//     and resources): what the fit model and the virtual node's
//     allocatable count (fit.PodRequests);
//   - its priority: the fit model tells the room the member's scheduler
//     would make by preempting it for a pod of higher priority.
//
// Its annotations, the rest of its spec and of its status are dropped.
// The labels and the spec are shared with the pods that have the same
// (internMetaAfter, memberSpecs): a workload's replicas on one node do.
func foreignPod(pod *corev1.Pod) *memberpod.Pod {
	uid := takeHostUID(&pod.ObjectMeta)
	s := &pod.Spec
	*s = corev1.PodSpec{
		NodeName:       s.NodeName,
		InitContainers: requestsOnly(s.InitContainers),
		Containers:     requestsOnly(s.Containers),
		Overhead:       s.Overhead,
		Resources:      s.Resources,
		// A workload's pods share one priority, and so still one spec.
		Priority: s.Priority,
	}
	internSpec(s)
	return &memberpod.Pod{ObjectMeta: identityMeta(&pod.ObjectMeta), HostUID: uid,
		Spec: internShared(&memberSpecs, s), Status: corev1.PodStatus{Phase: pod.Status.Phase}}
}

// trimMemberNode is what the member's node cache keeps of a node: what the
// virtual node is built from (clusternode: Eligible, the fit model, the
// labels all nodes share, the features it declares), that is its name,
// labels, taints, whether it takes pods, its capacity, allocatable,
// conditions and declared features. A kubelet's node
// also lists up to 50 images with their digests, its volumes, addresses,
// system info and annotations: most of its size, read by nothing here.
func trimMemberNode(n *corev1.Node) {
	// Nodes of a pool share their labels but for the hostname, their
	// capacity, and their conditions' words.
	n.ObjectMeta = identityMeta(&n.ObjectMeta, corev1.LabelHostname)
	n.Spec = corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable}
	st := &n.Status
	*st = corev1.NodeStatus{Capacity: internList(st.Capacity), Allocatable: internList(st.Allocatable), Phase: st.Phase, Conditions: st.Conditions,
		DeclaredFeatures: st.DeclaredFeatures}
	for i := range st.DeclaredFeatures {
		InternString(&st.DeclaredFeatures[i])
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		InternString(&c.Type)
		InternString(&c.Status)
		InternString(&c.Reason)
		InternString(&c.Message)
	}
}

// identityMeta is what the member caches keep of the metadata of an
// object flotilla only counts or leaves alone: what names it (name,
// namespace, UID, version, generation), its labels, which tell whose it
// is, and its deletion; the labels shared with the objects that have the
// same but for the values of unique.
func identityMeta(m *metav1.ObjectMeta, unique ...string) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, Labels: m.Labels,
		DeletionTimestamp: m.DeletionTimestamp, DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds}
	internMetaAfter(&out, nil, unique...)
	return out
}

// requestsOnly trims containers, in place, to their names, requests and
// restart policies (an init container that restarts always is a sidecar,
// whose requests add to the containers').
func requestsOnly(cs []corev1.Container) []corev1.Container {
	for i := range cs {
		c := &cs[i]
		*c = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy,
			Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}}
	}
	return cs
}

// cachedMember is the version of pod the member pod store cached holds,
// if any.
func cachedMember(cached func() cache.Store, pod *corev1.Pod) *memberpod.Pod {
	prev, _ := cachedObject(cached, pod).(*memberpod.Pod)
	return prev
}

// The functions below trim in place, allocating nothing.

func readContainers(cs []corev1.Container) []corev1.Container {
	for i := range cs {
		c := &cs[i]
		*c = corev1.Container{
			Name:          c.Name,
			Image:         c.Image,
			Resources:     c.Resources,
			RestartPolicy: c.RestartPolicy,
			EnvFrom:       c.EnvFrom,
			Env:           referenceEnv(c.Env),
		}
	}
	return cs
}

func readEphemeralContainers(cs []corev1.EphemeralContainer) []corev1.EphemeralContainer {
	for i := range cs {
		c := &cs[i]
		// The Secrets and ConfigMaps a debugging container reads keep
		// their member copies as the other containers' do.
		*c = corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Image: c.Image,
			EnvFrom: c.EnvFrom, Env: referenceEnv(c.Env)}}
	}
	return cs
}

// referenceEnv keeps the variables that name a Secret or a ConfigMap.
func referenceEnv(env []corev1.EnvVar) []corev1.EnvVar {
	return keepIn(env, func(e *corev1.EnvVar) bool {
		f := e.ValueFrom
		e.Value = ""
		return f != nil && (f.SecretKeyRef != nil || f.ConfigMapKeyRef != nil)
	})
}

// referenceVolumes keeps the volumes that name a Secret or a ConfigMap
// (but the member's root CA), without their items.
func referenceVolumes(vs []corev1.Volume) []corev1.Volume {
	return keepIn(vs, func(v *corev1.Volume) bool {
		switch {
		case v.Secret != nil:
			v.VolumeSource = corev1.VolumeSource{Secret: v.Secret}
			v.Secret.Items, v.Secret.DefaultMode = nil, nil
		case v.ConfigMap != nil:
			v.VolumeSource = corev1.VolumeSource{ConfigMap: v.ConfigMap}
			v.ConfigMap.Items, v.ConfigMap.DefaultMode = nil, nil
		case v.Projected != nil:
			v.VolumeSource = corev1.VolumeSource{Projected: v.Projected}
			v.Projected.DefaultMode = nil
			v.Projected.Sources = keepIn(v.Projected.Sources, func(p *corev1.VolumeProjection) bool {
				switch {
				case p.Secret != nil:
					p.Secret.Items = nil
					*p = corev1.VolumeProjection{Secret: p.Secret}
				case p.ConfigMap != nil && p.ConfigMap.Name != podspec.RootCAConfigMap:
					p.ConfigMap.Items = nil
					*p = corev1.VolumeProjection{ConfigMap: p.ConfigMap}
				default:
					// Of the token volume every pod has, its token is the
					// pod's ServiceAccount's, a dependency of every pod
					// through spec.serviceAccountName, and its root CA
					// the member's own: none of it names a dependency.
					return false
				}
				return true
			})
			return v.Projected.Sources != nil
		default:
			return podspec.VolumePluginSecret(v.VolumeSource) != ""
		}
		return true
	})
}

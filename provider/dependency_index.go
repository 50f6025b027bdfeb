// This file indexes pods by the objects they use: which pods wait for an
// object, and whether any still needs its member copy.

package provider

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podstate"
)

// usedKeys are the index keys of the objects a pod of namespace with spec
// uses.
func usedKeys(namespace string, spec *corev1.PodSpec) []string {
	deps := podDependencies(spec, nil)
	out := make([]string, 0, len(deps))
	for _, dep := range deps {
		out = append(out, namespace+"/"+dep.kind+"/"+dep.name)
	}
	return out
}

// indexMemberPod indexes a live member pod of this node by the objects it uses.
func (d *dependencies) indexMemberPod(obj any) ([]string, error) {
	pod, ok := memberpod.Of(obj)
	if !ok || !d.env.ours(pod) || pod.Terminal() {
		return nil, nil
	}
	return usedKeys(pod.Namespace, pod.Spec), nil
}

// indexHostPod indexes a live host pod bound to this node by the objects it
// uses; a pod using a ServiceAccount is found under the ServiceAccount for
// its image pull secrets too (see waiting).
func (d *dependencies) indexHostPod(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != d.env.cfg.NodeName || pod.DeletionTimestamp != nil || podstate.Terminal(pod) {
		return nil, nil
	}
	return usedKeys(pod.Namespace, &pod.Spec), nil
}

// hostPodDependencies is what a host pod needs: what its spec names. The
// image pull secrets of its ServiceAccount are not among them: the host's
// admission copied them into the spec of the pods that use them.
func (d *dependencies) hostPodDependencies(pod *corev1.Pod) []dependency {
	return podDependencies(&pod.Spec, nil)
}

// waiting returns the host pods bound to this node, not finished or being
// deleted, that have no member pod yet and need ref. They are looked up in
// the host pod index among the pods that use ref, directly or, for an image
// pull secret, through their ServiceAccount.
func (d *dependencies) waiting(ref objectRef, hostNS string) []*corev1.Pod {
	keys := []string{hostNS + "/" + ref.kind + "/" + ref.name}
	memberNS := d.env.target(hostNS).Namespace
	var out []*corev1.Pod
	found := map[types.UID]bool{}
	for _, key := range keys {
		objs, err := d.hostPods.ByIndex(d.hostIndex, key)
		if err != nil {
			continue
		}
		for _, obj := range objs {
			pod, ok := obj.(*corev1.Pod)
			if !ok || found[pod.UID] {
				continue
			}
			found[pod.UID] = true
			if m, err := d.env.memberPods.Get(memberNS, pod.Name); err == nil && d.env.ours(m) && m.HostUID == pod.UID {
				continue // its member pod is counted on the member side
			}
			if slices.ContainsFunc(d.hostPodDependencies(pod), func(x dependency) bool { return x.objectRef == ref }) {
				out = append(out, pod)
			}
		}
	}
	return out
}

// needed reports whether anything of this node still uses the object.
func (d *dependencies) needed(ref objectRef, hostNS, memberNS string) bool {
	if keys, _ := d.memberPods.IndexKeys(d.index, memberNS+"/"+ref.kind+"/"+ref.name); len(keys) > 0 {
		return true
	}
	return len(d.waiting(ref, hostNS)) > 0
}

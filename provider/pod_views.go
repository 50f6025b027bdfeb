// This file shows member pods to virtual-kubelet in host terms: GetPod,
// GetPodStatus and GetPods.

package provider

import (
	"context"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/provider/translate"
)

// GetPod returns the member pod in host terms (see translate.HostView), as the view
// virtual-kubelet compares with the pods its lister gives it (podcache.VirtualKubeletView), or
// a NotFound error when this host pod has no member pod.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	t := p.target(namespace)
	member, err := p.memberPods.Get(t.Namespace, name)
	if apierrors.IsNotFound(err) || (err == nil && !p.ours(member)) {
		return nil, errdefs.NotFoundf("pod %s/%s not found in cluster %s", t.Namespace, name, t.Cluster)
	}
	if err != nil {
		return nil, err
	}
	host, err := p.hostPods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return orphanView(member), nil
	}
	if err != nil {
		return nil, err
	}
	if member.HostUID != host.UID {
		return nil, errdefs.NotFoundf("pod %s/%s in cluster %s belongs to another host pod", t.Namespace, name, t.Cluster)
	}
	return podcache.VirtualKubeletView(translate.HostView(host, member, t)), nil
}

// orphanView names a member pod whose host pod is gone by its host
// coordinates, so virtual-kubelet can ask for its deletion.
func orphanView(m *memberpod.Pod) *corev1.Pod {
	ns, name := podcache.HostKeyOf(m)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: ns,
			UID:       m.HostUID,
		},
		Status: *m.Status.DeepCopy(),
	}
}

// GetPodStatus returns the status GetPod would.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every member pod this virtual node forwarded, in host
// terms (translate.HostView), whole: the kubelet API's pod list shows them as
// GetPod's views would not, with their containers and tolerations.
func (p *Provider) GetPods(_ context.Context) ([]*corev1.Pod, error) {
	members, err := p.memberPods.List(p.ownSelector())
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(members))
	for _, m := range members {
		ns, name := podcache.HostKeyOf(m)
		host, err := p.hostPods.Pods(ns).Get(name)
		if err != nil || host.UID != m.HostUID {
			out = append(out, orphanView(m))
			continue
		}
		out = append(out, translate.HostView(host, m, p.target(ns)))
	}
	return out, nil
}

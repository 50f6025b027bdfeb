// This file brings what may change on a running pod to its member pod.

package provider

import (
	"context"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/translate"
)

// UpdatePod applies to the member pod what may change on a running pod:
// container images, activeDeadlineSeconds, added tolerations, labels and
// annotations, and added ephemeral containers (syncEphemeral).
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) (err error) {
	ctx, end := p.measured(ctx, "provider.UpdatePod", "update", pod.Namespace+"/"+pod.Name)
	defer end(&err)
	pod, ok := p.whole(pod)
	if !ok {
		return nil // gone from the host since virtual-kubelet looked
	}
	t := p.target(pod.Namespace)
	src, applied, err := p.override(ctx, pod)
	if err != nil {
		return err
	}
	want := translate.ToMember(src, t)
	pods := p.cfg.MemberClient.CoreV1().Pods(t.Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return errdefs.NotFoundf("pod %s/%s not found in cluster %s", t.Namespace, pod.Name, t.Cluster)
		}
		if err != nil {
			return err
		}
		if !p.ours(cur) || cur.Labels[wellknown.HostUIDLabel] != string(pod.UID) {
			return errdefs.NotFoundf("pod %s/%s in cluster %s belongs to another host pod", t.Namespace, pod.Name, t.Cluster)
		}
		upd := cur.DeepCopy()
		if !applyMutable(upd, want) {
			return nil
		}
		_, err = pods.Update(ctx, upd, metav1.UpdateOptions{})
		if err == nil {
			p.mirrors.Services.PodChanged(pod.Namespace) // labels may now match other Services
		}
		return err
	})
	if err != nil {
		return err
	}
	p.syncEphemeral(ctx, pod, src, t)
	return p.recordOverrides(ctx, pod, applied)
}

// applyMutable copies the updatable fields of want into cur and reports
// whether anything changed.
func applyMutable(cur, want *corev1.Pod) bool {
	before := cur.DeepCopy()
	cur.Labels = want.Labels
	cur.Annotations = want.Annotations
	translate.CopyImages(cur.Spec.Containers, want.Spec.Containers)
	translate.CopyImages(cur.Spec.InitContainers, want.Spec.InitContainers)
	cur.Spec.ActiveDeadlineSeconds = want.Spec.ActiveDeadlineSeconds
	for _, t := range want.Spec.Tolerations {
		if !hasToleration(cur.Spec.Tolerations, t) {
			cur.Spec.Tolerations = append(cur.Spec.Tolerations, t)
		}
	}
	return !equality.Semantic.DeepEqual(before, cur)
}

func hasToleration(ts []corev1.Toleration, t corev1.Toleration) bool {
	for _, x := range ts {
		if equality.Semantic.DeepEqual(x, t) {
			return true
		}
	}
	return false
}

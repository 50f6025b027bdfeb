// This file adopts a running member pod as a host pod's, and releases it
// back to its cluster when the host pod goes.

package provider

import (
	"context"
	"fmt"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/translate"
)

// adopt takes over a member pod that already exists under the pod's name: it
// is this host pod's after a restart, an earlier host pod's leftover that has
// to go first, or not flotilla's at all, which is reported and left alone.
func (p *Provider) adopt(ctx context.Context, pod *corev1.Pod, t translate.Target) error {
	existing, err := p.cfg.MemberClient.CoreV1().Pods(t.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("member pod %s/%s vanished during adoption: %w", t.Namespace, pod.Name, transient.ErrRetry)
	}
	if err != nil {
		return fmt.Errorf("get pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
	}
	switch {
	case !p.ours(existing) && pod.Annotations[wellknown.AdoptAnnotation] == string(existing.UID) && existing.UID != "" &&
		existing.Annotations[wellknown.AdoptableAnnotation] == pod.Namespace+"/"+pod.Name:
		return p.takeOver(ctx, pod, existing, t)
	case !p.ours(existing):
		return fmt.Errorf("pod %s/%s already exists in cluster %s and is not managed by this flotilla virtual node", t.Namespace, pod.Name, t.Cluster)
	case existing.Labels[wellknown.HostUIDLabel] == string(pod.UID):
		return nil
	}
	if existing.DeletionTimestamp == nil {
		err := p.cfg.MemberClient.CoreV1().Pods(t.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			Preconditions: metav1.NewUIDPreconditions(string(existing.UID)),
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete leftover pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
		}
	}
	return fmt.Errorf("waiting for leftover pod %s/%s of an earlier host pod to terminate: %w", t.Namespace, pod.Name, transient.ErrRetry)
}

// takeOver stamps flotilla's identity on a member pod that was not
// flotilla's, because the host pod names it for adoption: from then on it
// is this host pod's member pod, as if forwarded from it, and it keeps
// running. A pod of another flotilla installation or virtual cluster is
// never taken.
func (p *Provider) takeOver(ctx context.Context, pod, existing *corev1.Pod, t translate.Target) error {
	if v, ok := existing.Labels[wellknown.InstallationLabel]; ok {
		return fmt.Errorf("pod %s/%s in cluster %s cannot be adopted: it belongs to flotilla installation %q, virtual cluster %q", t.Namespace, pod.Name, t.Cluster, v, existing.Labels[wellknown.ClusterLabel])
	}
	if existing.DeletionTimestamp != nil {
		return fmt.Errorf("pod %s/%s in cluster %s cannot be adopted: it is being deleted", t.Namespace, pod.Name, t.Cluster)
	}
	m := existing.DeepCopy()
	m.Labels = t.Owner().Stamp(m.Labels)
	m.Labels[wellknown.HostUIDLabel] = string(pod.UID)
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[wellknown.HostNamespaceAnnotation] = pod.Namespace
	m.Annotations[wellknown.HostNameAnnotation] = pod.Name
	if _, err := p.cfg.MemberClient.CoreV1().Pods(t.Namespace).Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("adopt pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, transient.ErrRetry)
		}
		return fmt.Errorf("adopt pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
	}
	log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("memberUID", existing.UID).Info("adopted a running member pod")
	p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, wellknown.EventAdopted, "Adopted the running pod %s/%s of cluster %s (uid %s)", t.Namespace, pod.Name, t.Cluster, existing.UID)
	return nil
}

// release hands a member pod back to its cluster: it loses flotilla's
// identity, and with it flotilla's care, and keeps running.
func (p *Provider) release(ctx context.Context, pod *corev1.Pod, memberUID types.UID, t translate.Target) error {
	pods := p.cfg.MemberClient.CoreV1().Pods(t.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != memberUID || !p.ours(cur) {
			return nil // already released, or not this one
		}
		for _, k := range []string{wellknown.ManagedByLabel, wellknown.ClusterLabel, wellknown.InstallationLabel, wellknown.HostUIDLabel} {
			delete(cur.Labels, k)
		}
		for _, k := range []string{wellknown.HostNamespaceAnnotation, wellknown.HostNameAnnotation, wellknown.AdoptAnnotation, wellknown.AdoptableAnnotation, wellknown.ReleaseAnnotation} {
			delete(cur.Annotations, k)
		}
		_, err = pods.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
	}
	log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).Info("released the member pod to its cluster")
	return nil
}

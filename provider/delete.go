// This file deletes member pods with their host pods, and finishes the
// deletion of host pods whose member pod is gone.

package provider

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/mirror"
	"flotilla.io/flotilla/provider/translate"
)

// deleteHostPod deletes a host pod at once, as a kubelet finishes the
// deletion of a pod whose containers stopped. The UID keeps the deletion
// off a newer pod of the same name.
func (p *Provider) deleteHostPod(ctx context.Context, host *corev1.Pod) error {
	err := kube.DeletePod(ctx, p.cfg.HostClient, host.Namespace, host.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(host.UID)),
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete host pod %s/%s: %w", host.Namespace, host.Name, err)
	}
	return nil
}

// DeletePod deletes the member pod with the host pod's grace period. It may
// be called many times — virtual-kubelet calls it again when the grace
// period shortens, as it does when the host pod's deletion is finished — so
// it works from the member pod cache and writes only what is still to do:
// nothing while the member pod terminates with no longer a grace period than
// asked for; the host pod's deletion is finished once the member pod is gone.
// A member pod the cache has not shown yet is left to the orphan check,
// which deletes it as soon as it appears without its host pod. It reports
// success rather than NotFound for a pod already gone, because
// virtual-kubelet records every error, NotFound included, as a
// ProviderDeleteFailed warning on the host pod.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) (err error) {
	ctx, end := p.measured(ctx, "provider.DeletePod", "delete", pod.Namespace+"/"+pod.Name)
	defer end(&err)
	// A view gone from the cache still names the pod, its grace period
	// and its marks: all that deleting needs.
	pod, _ = p.whole(pod)
	t := p.target(pod.Namespace)
	member, err := p.memberPods.Get(t.Namespace, pod.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	// The mark is looked for on the member pod too, which UpdatePod gave
	// it: a host pod removed at once reaches DeletePod as virtual-kubelet
	// last saw it, which may be before the mark.
	release := pod.Annotations[wellknown.ReleaseAnnotation] == "true" || (member != nil && member.Annotations[wellknown.ReleaseAnnotation] == "true")
	if err == nil && p.ours(member) && member.HostUID == pod.UID && release && member.DeletionTimestamp == nil {
		if err := p.release(ctx, pod, member.UID, t); err != nil {
			return err
		}
		p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, wellknown.EventReleased, "Released pod %s/%s to cluster %s, where it keeps running", t.Namespace, pod.Name, t.Cluster)
		if pod.DeletionTimestamp != nil && ptr.Deref(pod.DeletionGracePeriodSeconds, 1) != 0 {
			return p.deleteHostPod(ctx, pod)
		}
		return nil
	}
	if err == nil && p.ours(member) && member.HostUID == pod.UID {
		if (member.DeletionTimestamp != nil && !shorterGrace(pod.DeletionGracePeriodSeconds, member.DeletionGracePeriodSeconds)) ||
			p.deleteAsked(member, pod.DeletionGracePeriodSeconds) {
			return nil // terminating; syncStatus finishes the host pod once it is gone
		}
		err := kube.DeletePod(ctx, p.cfg.MemberClient, t.Namespace, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Preconditions:      metav1.NewUIDPreconditions(string(member.UID)),
		})
		if err == nil {
			p.askedToDelete(member, pod.DeletionGracePeriodSeconds)
			return nil
		}
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			if transient.Is(err) {
				p.waitingForCluster(pod, t)
			}
			return fmt.Errorf("delete pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
		}
	}
	// The member pod is gone. Finish the host pod's deletion as a kubelet
	// does, unless it is already being removed at once.
	if pod.DeletionTimestamp != nil && ptr.Deref(pod.DeletionGracePeriodSeconds, 1) != 0 {
		return p.deleteHostPod(ctx, pod)
	}
	return nil
}

// waitingForCluster says, on a host pod whose deletion cannot reach its
// member, why it stays Terminating: as for a pod on an unreachable node,
// nobody can tell that its member copy stopped, so no replacement of a
// StatefulSet pod starts (never two copies), and a pod with claims keeps
// waiting for the cluster holding its data.
func (p *Provider) waitingForCluster(pod *corev1.Pod, t translate.Target) {
	msg := fmt.Sprintf("Cluster %s cannot be reached, so its copy of this pod cannot be stopped or seen to stop: "+
		"the pod stays Terminating until the cluster answers, and its controller makes no replacement for a StatefulSet pod meanwhile", t.Cluster)
	if claims := mirror.PodClaimNames(pod); len(claims) > 0 {
		msg += fmt.Sprintf(". Its data (claim %s) is in that cluster; to start afresh elsewhere without it, "+
			"delete the claim and force-delete this pod (kubectl delete pod --force), accepting that the old copy may still run there", strings.Join(claims, ", "))
	}
	p.cfg.Recorder.Event(pod, corev1.EventTypeWarning, wellknown.EventWaitingForCluster, msg)
}

// PodEventFilter is virtual-kubelet's PodEventFilterFunc. It hides a host
// pod whose deletion is already being finished (grace period 0) and whose
// member pod is gone, since virtual-kubelet has nothing left to do for it:
// the informer's filtering handler turns the update that shortened the
// grace period into a delete, so virtual-kubelet forgets the pod at once
// instead of comparing it in full with its last spec (a millisecond of CPU
// per pod) and calling DeletePod again.
func (p *Provider) PodEventFilter(_ context.Context, pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil || ptr.Deref(pod.DeletionGracePeriodSeconds, 1) != 0 {
		return true
	}
	member, err := p.memberPods.Get(p.target(pod.Namespace).Namespace, pod.Name)
	return err == nil && p.ours(member) && member.HostUID == pod.UID
}

// shorterGrace reports whether grace period a is shorter than b; nil is the
// pod's default, never shorter.
func shorterGrace(a, b *int64) bool {
	return a != nil && (b == nil || *a < *b)
}

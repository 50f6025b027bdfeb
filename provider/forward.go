// This file forwards a host pod into its member cluster (CreatePod).

package provider

import (
	"context"
	"fmt"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podfields"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/mirror"
	"flotilla.io/flotilla/provider/translate"
)

// whole returns the host pod virtual-kubelet handed the provider, as the
// cache holds it when virtual-kubelet had only a view of it (podcache.VirtualKubeletView). It
// reports false when the cache no longer holds that pod: a view is then
// all there is, and it must never be forwarded.
func (p *Provider) whole(pod *corev1.Pod) (*corev1.Pod, bool) {
	if !podcache.IsVirtualKubeletView(pod) {
		return pod, true
	}
	host, err := p.hostPods.Pods(pod.Namespace).Get(pod.Name)
	if err != nil || host.UID != pod.UID {
		return pod, false
	}
	return host, true
}

// CreatePod forwards a host pod into the member. Failures that may pass
// (the member is unreachable, the namespace's service account is not there
// yet) are retried in the background so that a pod with restartPolicy Never
// is not failed for them; other failures are returned, and virtual-kubelet
// records them on the host pod.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) (err error) {
	key := pod.Namespace + "/" + pod.Name
	ctx, span := p.startSpan(ctx, "provider.CreatePod", key)
	defer span.End()
	pod, ok := p.whole(pod)
	if !ok {
		return nil // gone from the host since virtual-kubelet looked
	}
	if wellknown.IsNodeDebugPod(pod) {
		p.refuseNodeDebugPod(ctx, pod)
		return nil
	}
	held, err := p.forward(ctx, pod)
	if err == nil || !transient.Is(err) {
		span.SetStatus(err)
		p.cfg.Metrics.created(p.cfg.NodeName, held, err)
		return err
	}
	span.SetStatus(err)
	p.cfg.Metrics.retrying(p.cfg.NodeName)
	log.G(ctx).WithError(err).Info("forwarding failed, will retry")
	p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, wellknown.EventForwardRetrying,
		"Forwarding to member cluster %s failed, retrying: %v", p.cfg.NodeName, err)
	p.retryQueue.AddRateLimited(key)
	return nil
}

// forward creates the member pod of a host pod, or reports it held: not
// forwarded because an object it needs is missing in the host, which is
// reported on the pod, and forwarded again once the object exists.
func (p *Provider) forward(ctx context.Context, pod *corev1.Pod) (held bool, err error) {
	if why, err := p.unsupported(ctx, pod); err != nil || why != "" {
		if err != nil {
			return false, err
		}
		return true, p.refuseFields(ctx, pod, why)
	}
	t := p.target(pod.Namespace)
	if err := p.mirrors.Namespaces.Ensure(ctx, t.Namespace, pod.Namespace); err != nil {
		return false, err
	}
	if ready, err := p.deps.ensure(ctx, pod, t); err != nil || !ready {
		return err == nil, err
	}
	if err := p.ensurePriorityClass(ctx, pod); err != nil {
		return false, err
	}
	if err := p.mirrors.Claims.Ensure(ctx, pod, t); err != nil {
		return false, err
	}
	src, applied, err := p.override(ctx, pod)
	if err != nil {
		return false, err
	}
	member := translate.ToMember(src, t)
	if err := Confine(member, p.cfg.Partition); err != nil {
		return false, fmt.Errorf("pod %s/%s on virtual cluster %s: %w", pod.Namespace, pod.Name, t.Cluster, err)
	}
	stored, err := kube.CreatePod(ctx, p.cfg.MemberClient, member)
	if unknown := podfields.UnknownInError(err); len(unknown) > 0 {
		// Strict field validation: the member does not know a field the
		// pod sets, and its schema did not tell (it was not read yet).
		if p.cfg.Fields != nil {
			p.cfg.Fields.Unknown(unknown...)
		}
		return true, p.refuseFields(ctx, pod, fit.UnknownFieldReason(unknown[0], p.memberVersion(), t.Cluster))
	}
	switch {
	case apierrors.IsAlreadyExists(err):
		if err := p.adopt(ctx, pod, t); err != nil {
			return false, err
		}
	case mirror.MissingClass(err):
		// Deleted in the member since it was seen there, or not seen for
		// want of the right to read it: made now, and the pod forwarded
		// again; or, where it cannot be made, the pod is refused.
		p.mirrors.PriorityClasses.Forget(pod.Spec.PriorityClassName)
		out, ensureErr := p.mirrors.PriorityClasses.Ensure(ctx, pod)
		if ensureErr != nil {
			return false, fmt.Errorf("create pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, ensureErr)
		}
		if !out.Copied {
			return false, fmt.Errorf("create pod %s/%s in cluster %s: %w (flotilla-node may not read PriorityClasses there to copy it)", t.Namespace, pod.Name, t.Cluster, err)
		}
		return false, fmt.Errorf("create pod %s/%s in cluster %s: %w: %w", t.Namespace, pod.Name, t.Cluster, err, transient.ErrRetry)
	case err != nil:
		return false, fmt.Errorf("create pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
	}
	if err == nil { // not adopted
		lost, err := p.createdWithout(ctx, pod, member, stored)
		if err != nil {
			return false, err
		}
		if len(lost) > 0 {
			return true, p.refuseFields(ctx, pod, fit.DroppedFieldReason(lost[0], p.memberVersion(), t.Cluster))
		}
	}
	p.cfg.Metrics.memberPodCreated(p.cfg.NodeName, pod)
	// Ephemeral containers added before the pod was forwarded (while it
	// waited for a Secret, say) or while this process was down.
	p.syncEphemeral(ctx, pod, src, t)
	return false, p.recordOverrides(ctx, pod, applied)
}

// ensurePriorityClass makes sure the member has the PriorityClass the pod
// names, and says on the pod when the member's differs from the host's.
func (p *Provider) ensurePriorityClass(ctx context.Context, pod *corev1.Pod) error {
	out, err := p.mirrors.PriorityClasses.Ensure(ctx, pod)
	if err != nil {
		return fmt.Errorf("pod %s/%s in cluster %s: %w", pod.Namespace, pod.Name, p.cfg.NodeName, err)
	}
	switch {
	case out.Copied:
		p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, wellknown.EventPriorityClassCopied,
			"PriorityClass %s copied into cluster %s with the host's value %d", pod.Spec.PriorityClassName, p.cfg.NodeName, *pod.Spec.Priority)
	case out.Differs:
		p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, wellknown.EventPriorityClassDiffers,
			"cluster %s has its own PriorityClass %s with value %d, the host's has %d: the member's is kept, and its scheduler orders this pod by it",
			p.cfg.NodeName, pod.Spec.PriorityClassName, out.Value, *pod.Spec.Priority)
	}
	return nil
}

// memberVersion is the member's Kubernetes version, as far as known.
func (p *Provider) memberVersion() string {
	if p.cfg.Fields == nil {
		return ""
	}
	return p.cfg.Fields.Fields().Version
}

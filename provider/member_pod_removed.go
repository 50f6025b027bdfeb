// This file deals with a member pod that someone other than flotilla
// removed: evicted by a drain in the member, or deleted there.

package provider

import (
	"context"
	"fmt"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/wellknown"
)

// disruption is why a member pod went, as the last state its deletion
// event carries showed: the DisruptionTarget condition that the component
// removing it set first (the eviction API, the member's scheduler
// preempting it, its pod garbage collector). A pod deleted plainly has no
// reason.
type disruption struct {
	hostUID         types.UID
	reason, message string
}

// evicted reports whether the member pod was evicted through the eviction
// API, as kubectl drain does.
func (d disruption) evicted() bool { return d.reason == wellknown.ReasonEvictionByEvictionAPI }

// disruptionOf is why member pod m went, as its status says.
func disruptionOf(m *memberpod.Pod) disruption {
	d := disruption{hostUID: m.HostUID}
	for _, c := range m.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			d.reason, d.message = c.Reason, c.Message
		}
	}
	return d
}

// rememberGone keeps, for the status sync of its host pod, that a member
// pod's deletion event came and why the pod went: by then the member pod
// cache no longer has the pod. A sync may see the pod gone from the cache
// before its deletion event is handled (a sync queued by the pod's last
// update, the eviction's DisruptionTarget), so the sync acts on a member
// pod gone only with this record, which it is sure to find, since the
// record is kept before the next sync is queued. Every sync takes the
// record of its key, so none outlives it.
func (p *Provider) rememberGone(m *memberpod.Pod) {
	if ns, name := podcache.HostKeyOf(m); ns != "" && name != "" {
		p.gone.Store(ns+"/"+name, disruptionOf(m))
	}
}

// takeGone removes and returns what rememberGone kept for the host pod of
// key.
func (p *Provider) takeGone(key string) (disruption, bool) {
	v, ok := p.gone.LoadAndDelete(key)
	if !ok {
		return disruption{}, false
	}
	return v.(disruption), true
}

// memberPodRemoved deals with a running host pod whose member pod someone
// other than flotilla removed. In one cluster an evicted or deleted pod is
// gone, and its controller makes a replacement that the scheduler places
// where it fits: a pod with a controller is deleted, so that a drain in a
// member leaves nothing behind in the host. A bare pod, which nothing
// would replace, fails with the reason instead, as a pod a kubelet evicts
// does, so that it stays visible.
func (p *Provider) memberPodRemoved(ctx context.Context, host *corev1.Pod, memberNamespace string, why disruption) error {
	cluster := p.cfg.NodeName
	eventType, reason := corev1.EventTypeWarning, wellknown.EventMemberPodDeleted
	what := fmt.Sprintf("Pod %s/%s was deleted from member cluster %s outside of flotilla", memberNamespace, host.Name, cluster)
	if why.reason != "" {
		what += fmt.Sprintf(" (%s: %s)", why.reason, why.message)
	}
	if why.evicted() {
		// A drain in the member is maintenance, not a fault.
		eventType, reason = corev1.EventTypeNormal, wellknown.EventMemberPodEvicted
		what = fmt.Sprintf("Pod %s/%s was evicted in member cluster %s (%s)", memberNamespace, host.Name, cluster, why.message)
	}
	status := DeletedStatus(host, cluster, metav1.NewTime(p.cfg.Clock.Now()))
	status.Message = what + "."
	if why.reason != "" && !hasCondition(status.Conditions, corev1.DisruptionTarget) {
		status.Conditions = append(status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: why.reason, Message: why.message, LastTransitionTime: metav1.NewTime(p.cfg.Clock.Now())})
	}
	key := host.Namespace + "/" + host.Name
	owner := metav1.GetControllerOf(host)
	if owner == nil {
		logger := log.G(ctx).WithField("pod", key).WithField("reason", why.reason)
		if why.evicted() {
			logger.Info("member pod evicted in the member: the pod failed")
		} else {
			logger.Warn("member pod removed out of band: the pod failed")
		}
		p.cfg.Recorder.Event(host, eventType, reason, what)
		p.publish(host, status)
		return nil
	}
	if len(host.Finalizers) > 0 {
		// The pod outlives its deletion until its finalizers go (a Job's
		// tracking finalizer among them): it ends Failed first, as a
		// kubelet ends a pod it stopped, so that whoever holds it counts
		// it as ended.
		p.publish(host, status)
	}
	if err := p.deleteHostPod(ctx, host); err != nil {
		return err
	}
	log.G(ctx).WithField("pod", key).WithField("reason", why.reason).Info("member pod removed out of band: deleted the host pod")
	p.cfg.Recorder.Eventf(host, eventType, reason, "%s; deleted for its %s to replace.", what, owner.Kind)
	return nil
}

// hasCondition reports whether conditions hold one of type t.
func hasCondition(conditions []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

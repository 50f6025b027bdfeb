// This file hands a pod back to the host scheduler when its member cannot
// schedule it, as a kubelet rejects a pod at admission.

package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/wellknown"
)

// handBack is a hand-back under way: the member pod is being deleted, and
// once it is gone the host pod fails with message.
type handBack struct {
	uid     types.UID
	message string
}

// unschedulable reports since when the member's scheduler has been
// unable to place m, and its answer. A pod the member's scheduler
// nominated a node for is not: it preempted lower-priority pods there and
// the pod is placed once they are gone, however long they take to end.
func unschedulable(m *memberpod.Pod) (time.Time, string, bool) {
	if m.Spec.NodeName != "" || m.DeletionTimestamp != nil || m.Status.NominatedNodeName != "" {
		return time.Time{}, "", false
	}
	for _, c := range m.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.LastTransitionTime.Time, c.Message, true
		}
	}
	return time.Time{}, "", false
}

// handBackIfStuck hands back a pod the member has not been able to
// schedule for HandBackAfter, and reports whether it did (its member pod
// is then being deleted, and syncStatusOf fails the host pod once it is
// gone, never before: a StatefulSet's pod never has two copies). Before
// then it checks again when the wait is over. A pod without a controller
// is left where it is, with an Event saying why it waits.
func (p *Provider) handBackIfStuck(ctx context.Context, key string, host *corev1.Pod, member *memberpod.Pod) (bool, error) {
	since, answer, ok := unschedulable(member)
	if !ok || p.cfg.HandBackAfter <= 0 {
		p.told.Delete(key)
		return false, nil
	}
	waited := p.cfg.Clock.Since(since)
	if waited < p.cfg.HandBackAfter {
		p.statusQueue.AddAfter(key, p.cfg.HandBackAfter-waited)
		return false, nil
	}
	owner := metav1.GetControllerOf(host)
	if owner == nil {
		if last, ok := p.told.Load(key); !ok || last != answer {
			p.told.Store(key, answer)
			p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, wellknown.EventMemberUnschedulable,
				"cluster %s has not been able to schedule this pod for %s: %s. It has no controller to make a replacement elsewhere, so it keeps waiting there; delete it to place it again.",
				p.cfg.NodeName, waited.Round(time.Second), answer)
		}
		return false, nil
	}
	p.handed.Store(key, handBack{uid: host.UID, message: fmt.Sprintf(
		"cluster %s could not schedule this pod for %s: %s. Handed back so that its %s makes a replacement that can go to another cluster.",
		p.cfg.NodeName, waited.Round(time.Second), answer, owner.Kind)})
	// The resourceVersion precondition keeps a pod the member bound since
	// it was read: it is not deleted.
	rv := member.ResourceVersion
	err := p.cfg.MemberClient.CoreV1().Pods(member.Namespace).Delete(ctx, member.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &member.UID, ResourceVersion: &rv},
	})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		log.G(ctx).WithField("pod", key).WithField("answer", answer).Info("member cannot schedule the pod: handing it back")
		return true, nil
	case apierrors.IsConflict(err):
		p.handed.Delete(key)
		p.statusQueue.Add(key) // look again at the pod as it is now
		return false, nil
	default:
		p.handed.Delete(key)
		return false, fmt.Errorf("hand back pod %s: delete it in cluster %s: %w", key, p.cfg.NodeName, err)
	}
}

// handedBack fails the host pod of a hand-back whose member pod is gone,
// and reports whether key was one.
func (p *Provider) handedBack(key string, host *corev1.Pod) bool {
	v, ok := p.handed.LoadAndDelete(key)
	if !ok || v.(handBack).uid != host.UID {
		return false
	}
	msg := v.(handBack).message
	status := DeletedStatus(host, p.cfg.NodeName, metav1.NewTime(p.cfg.Clock.Now()))
	status.Reason = wellknown.ReasonMemberUnschedulable
	status.Message = msg
	p.cfg.Recorder.Event(host, corev1.EventTypeWarning, wellknown.EventHandedBack, msg)
	p.publish(host, status)
	return true
}

// forgetHandBack drops what is kept for a host pod that is gone.
func (p *Provider) forgetHandBack(key string) {
	p.handed.Delete(key)
	p.told.Delete(key)
}

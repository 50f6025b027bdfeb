// This file follows member pods: a change is pushed to the host pod's
// status, and a member pod gone or orphaned is dealt with.

package provider

import (
	"context"
	"fmt"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podstate"
)

// memberPodChanged queues a status sync of the host pod a member pod
// stands for, and starts its status latency clock.
func (p *Provider) memberPodChanged(obj any) {
	m, ok := memberpod.Of(obj)
	if !ok {
		return
	}
	ns, name := podcache.HostKeyOf(m)
	if ns == "" || name == "" {
		return
	}
	p.cfg.Metrics.memberPodChanged(ns + "/" + name)
	p.statusQueue.Add(ns + "/" + name)
}

// syncStatus brings the host pod in line with its member pod. It is level
// based: it looks at both pods as they are now, whatever event brought it here.
func (p *Provider) syncStatus(ctx context.Context, key string) (err error) {
	ctx, end := p.measured(ctx, "provider.syncStatus", "status", key)
	defer end(&err)
	return p.syncStatusOf(ctx, key)
}

func (p *Provider) syncStatusOf(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	t := p.target(ns)
	why, gone := p.takeGone(key)
	member, err := p.memberPods.Get(t.Namespace, name)
	if apierrors.IsNotFound(err) || (err == nil && !p.ours(member)) {
		member = nil
	} else if err != nil {
		return err
	}
	host, err := p.hostPods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && host.Spec.NodeName != p.cfg.NodeName) {
		host = nil
	} else if err != nil {
		return err
	}
	if member != nil && (host == nil || member.HostUID != host.UID) {
		// The member pod's host pod is gone: deleted or evicted while the
		// member was unreachable, or while this process was down.
		if err := p.deleteOrphan(ctx, member); err != nil {
			return err
		}
		member = nil
	}
	if host == nil {
		p.seen.Delete(key)
		p.refusedFields.Delete(key)
		p.statusBeyond.Delete(key)
		p.forgetHandBack(key)
		p.nothingToWrite(key)
		return nil
	}
	switch {
	case member != nil:
		p.seen.Store(key, host.UID)
		p.reportStatusBeyond(ctx, key, host, member)
		p.reportStatusHostLacks(key, host, member)
		if podstate.Terminal(host) {
			p.nothingToWrite(key)
			return nil
		}
		if host.DeletionTimestamp == nil {
			if done, err := p.handBackIfStuck(ctx, key, host, member); done || err != nil {
				return err
			}
		}
		status, matters := statusWanted(host, member)
		if p.memberUnreachable() {
			status, matters = unreachableStatus(host, p.cfg.NodeName)
		}
		if !matters {
			p.nothingToWrite(key)
			return nil
		}
		p.publish(host, status)
	case host.DeletionTimestamp != nil:
		// The member pod is gone: like a kubelet whose containers have
		// stopped, finish the deletion in the host right away.
		p.seen.Delete(key)
		p.nothingToWrite(key)
		return p.deleteHostPod(ctx, host)
	case podstate.Terminal(host):
		p.seen.Delete(key)
		p.nothingToWrite(key)
	default:
		if p.handedBack(key, host) {
			p.seen.Delete(key)
			return nil
		}
		if p.fieldsRefused(key, host) {
			// Deleted by flotilla for a field the member lost; the pod
			// says so already (refuseFields).
			p.seen.Delete(key)
			p.nothingToWrite(key)
			return nil
		}
		if !gone || why.hostUID != host.UID {
			// Not created yet, or its deletion event is still to come
			// (rememberGone).
			p.nothingToWrite(key)
			return nil
		}
		if uid, ok := p.seen.LoadAndDelete(key); !ok || uid != host.UID {
			p.nothingToWrite(key)
			return nil // created before this process started
		}
		if err := p.memberPodRemoved(ctx, host, t.Namespace, why); err != nil {
			// Tried again as it was seen this time.
			p.seen.Store(key, host.UID)
			p.gone.Store(key, why)
			return err
		}
	}
	return nil
}

// deleteOrphan deletes a member pod whose host pod no longer exists. The UID
// precondition makes it exactly-once and keeps it off any newer pod of the
// same name.
func (p *Provider) deleteOrphan(ctx context.Context, m *memberpod.Pod) error {
	if m.DeletionTimestamp != nil || p.deleteAsked(m, nil) {
		return nil
	}
	// The cache may lag: a pod released to its cluster (its identity
	// taken off) since the version seen here must not be deleted, so the
	// deletion holds only for that version. A later one is looked at
	// again when its own event comes.
	pre := metav1.NewUIDPreconditions(string(m.UID))
	if m.ResourceVersion != "" {
		pre.ResourceVersion = &m.ResourceVersion
	}
	err := p.cfg.MemberClient.CoreV1().Pods(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{Preconditions: pre})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete orphaned pod %s/%s in cluster %s: %w", m.Namespace, m.Name, p.cfg.NodeName, err)
	}
	log.G(ctx).WithField("pod", m.Namespace+"/"+m.Name).Info("deleted member pod whose host pod is gone")
	return nil
}

// nothingToWrite stops the status clock of a host pod whose sync found
// nothing to write, unless a write of its status is still under way: the
// cache may show that write before its Update returns, and the sync this
// queues as another writer's change would otherwise stop the clock the
// write is about to read.
func (p *Provider) nothingToWrite(key string) {
	if !p.hostStatus.writing(key) {
		p.cfg.Metrics.statusUnchanged(key)
	}
}

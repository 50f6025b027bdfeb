// This file sets right what no event shows: a periodic pass over the
// virtual node's pods that compares every host pod's status with its
// member pod's, as a kubelet's status manager does.

package provider

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/provider/translate"
)

// statusResyncInterval is how often the pass runs.
//
// Events set statuses right as they come: a member pod's change, a
// status another writer gave a host pod (hostStatus.changedElsewhere), a
// host pod deleted or bound. The pass is the safety net for what none of
// them shows, a write that failed for good or an event a restarted watch
// skipped, so it need not run often. A kubelet makes the same pass every
// 10 s; here it costs, per pod, two cache reads, the status translation
// and a comparison, about 12 µs (BenchmarkQueueWrongStatuses: 12 ms and
// 2.7 MB of garbage for 1,000 pods), and queues only the pods found
// wrong. Once a minute, a node of 10,000 pods spends two thousandths of a
// core on it and writes nothing.
const statusResyncInterval = time.Minute

// resyncStatuses runs the pass every statusResyncInterval until ctx ends.
func (p *Provider) resyncStatuses(ctx context.Context) {
	t := p.cfg.Clock.NewTimer(statusResyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			p.queueWrongStatuses()
			t.Reset(statusResyncInterval)
		}
	}
}

// queueWrongStatuses queues the status sync (syncStatus) of every host
// pod whose status is not what its member pod says or whose deletion
// waits for a member pod gone already, and of every member pod whose host
// pod is gone. It returns how many it queued.
func (p *Provider) queueWrongStatuses() int {
	queued := 0
	hosts, _ := p.hostPods.List(labels.Everything())
	for _, host := range hosts {
		if host.Spec.NodeName != p.cfg.NodeName || podstate.Terminal(host) {
			continue
		}
		member, err := p.memberPods.Get(p.target(host.Namespace).Namespace, host.Name)
		if err != nil || !p.ours(member) || member.HostUID != host.UID {
			member = nil
		}
		wrong := false
		switch {
		case member != nil:
			_, wrong = statusWanted(host, member)
		default:
			// Not forwarded yet (virtual-kubelet's to do), or deleted
			// with its member pod gone: only the host pod's end is left.
			wrong = host.DeletionTimestamp != nil
		}
		if wrong {
			p.statusQueue.Add(host.Namespace + "/" + host.Name)
			queued++
		}
	}
	members, _ := p.memberPods.List(p.ownSelector())
	for _, m := range members {
		if !p.ours(m) {
			continue
		}
		ns, name := podcache.HostKeyOf(m)
		if ns == "" || name == "" {
			continue
		}
		if host, err := p.hostPods.Pods(ns).Get(name); err != nil || host.UID != m.HostUID {
			p.statusQueue.Add(ns + "/" + name) // an orphan, for deleteOrphan
			queued++
		}
	}
	return queued
}

// statusWanted is the status host should have as member says, and whether
// writing it would change anything that matters.
func statusWanted(host *corev1.Pod, member *memberpod.Pod) (corev1.PodStatus, bool) {
	status := translate.HostStatus(host, &member.Status)
	cur := host.Status
	if host.DeletionTimestamp != nil {
		// The apiserver bumps a pod's generation as its graceful
		// deletion starts. Observing that alone is not worth a write
		// (one in five of a forwarded pod's host writes) on a pod
		// about to go: the member pod's next status that matters (a
		// kubelet's stopped containers) carries it.
		cur.ObservedGeneration = status.ObservedGeneration
	}
	return status, translate.StatusMatters(cur, status)
}

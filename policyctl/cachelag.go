package policyctl

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"flotilla.io/flotilla/propagation"
)

// cacheLagWait bounds how long an admission waits for its cache to show
// the pod whose departure made a controller create the pod admitted;
// cacheLagPoll is how often it looks.
const (
	cacheLagWait = time.Second
	cacheLagPoll = 20 * time.Millisecond
)

// revisionOf names the controller revision a pod belongs to (a
// Deployment's ReplicaSet, a StatefulSet's or DaemonSet's revision): pods
// of one revision replace one another.
func revisionOf(p *corev1.Pod) string {
	for _, k := range []string{appsv1.DefaultDeploymentUniqueLabelKey, appsv1.ControllerRevisionHashLabelKey} {
		if v := p.Labels[k]; v != "" {
			return k + "=" + v
		}
	}
	return ""
}

// settledView is the live view an admission of pod places it by. A
// controller replaces a pod once it has seen it go (deleted by hand,
// evicted), and the webhook's cache may not show that yet. The departed
// pod would then still hold its rank, the replacement would get the rank
// after the last, and the next scale-down would delete the replacement
// instead of the pod the decision wants gone, and flotilla-policy would
// move a replica to restore the split. So while the view holds as many
// pods as the decision places (those admitted but not cached yet
// included), all of the admitted pod's revision, the admission waits for
// the cache to show one go, up to cacheLagWait, then places the pod by
// what it shows. A scale-up (fewer pods than placed) and a rollout's surge
// (pods of another revision) do not wait.
func (h *PodPlacer) settledView(ctx context.Context, tpl Template, d propagation.Decision, pod *corev1.Pod) (liveView, error) {
	var total int32
	for _, t := range d.Targets {
		total += t.Replicas
	}
	rev := revisionOf(pod)
	var live liveView
	err := wait.PollUntilContextTimeout(ctx, cacheLagPoll, cacheLagWait, true, func(ctx context.Context) (bool, error) {
		epoch := h.ledger.epoch()
		v, err := h.placer.live(ctx, tpl)
		if err != nil {
			return false, err
		}
		v.epoch = epoch
		live = v
		return !h.full(tpl, v, total, rev), nil
	})
	if wait.Interrupted(err) {
		// The cache still shows every replica: a pod placed anew, or a
		// replacement whose predecessor the cache has not let go of.
		err = nil
	}
	return live, err
}

// full reports whether view v of tpl holds total pods or more, with the
// assignments not cached yet, all of revision rev.
func (h *PodPlacer) full(tpl Template, v liveView, total int32, rev string) bool {
	if rev == "" || len(v.revisions) != 1 || !v.revisions[rev] {
		return false
	}
	var n int32
	for _, c := range h.ledger.counts(tpl.UID, v) {
		n += c
	}
	return n >= total
}

package policyctl

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/propagation"
)

// move is one eviction that brings a template closer to its decision.
type move struct {
	pod  *corev1.Pod
	from string
	why  string
}

// nextMove picks the pod to evict so that the template's replicas approach
// the decision, or nil when none should move now. A pod in a cluster the
// decision no longer chooses moves first, whatever the state of the
// others, unless a Divided template runs more pods than its replicas: its
// controller is scaling down, deleting by pod-deletion-cost the pods the
// decision no longer wants (a cluster whose share fell to zero among
// them), and an eviction now would only make it create one more.
// Otherwise a Divided template rebalances only when it is steady —
// exactly its replicas, all Ready — and some cluster is below its target
// while another is above: then the pod of the most surplus cluster that a
// scale-down would delete first (lowest pod-deletion-cost) moves.
func nextMove(d propagation.Decision, replicas int32, pods []*corev1.Pod) *move {
	chosen := map[string]bool{}
	for _, t := range d.Targets {
		if d.Mode != policyv1alpha1.ReplicaSchedulingTypeDivided || t.Replicas > 0 {
			chosen[t.Cluster] = true
		}
	}
	divided := d.Mode == policyv1alpha1.ReplicaSchedulingTypeDivided
	if divided && int32(len(pods)) > replicas {
		return nil
	}
	counts := map[string]int32{}
	ready := 0
	for _, p := range pods {
		c := clusterOf(p)
		if c != "" && !chosen[c] {
			return &move{pod: p, from: c, why: "cluster " + c + " is no longer chosen"}
		}
		counts[c]++
		if podstate.Ready(p) {
			ready++
		}
	}
	if !divided || int32(len(pods)) != replicas || ready != len(pods) {
		return nil
	}
	var over, under string
	var most int32
	for _, t := range d.Targets {
		switch diff := counts[t.Cluster] - t.Replicas; {
		case diff > most:
			over, most = t.Cluster, diff
		case diff < 0 && under == "":
			under = t.Cluster
		}
	}
	if over == "" || under == "" {
		return nil
	}
	var victims []*corev1.Pod
	for _, p := range pods {
		if clusterOf(p) == over {
			victims = append(victims, p)
		}
	}
	v := slices.MinFunc(victims, func(a, b *corev1.Pod) int {
		if c := cmp.Compare(deletionCost(a), deletionCost(b)); c != 0 {
			return c
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) // newest first
	})
	return &move{pod: v, from: over, why: fmt.Sprintf("cluster %s runs %d above its target while cluster %s runs below", over, most, under)}
}

// clusterOf is where a pod runs, or was placed to run.
func clusterOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	return p.Annotations[wellknown.PolicyClusterAnnotation]
}

func deletionCost(p *corev1.Pod) int64 {
	v, _ := strconv.ParseInt(p.Annotations[wellknown.DeletionCostAnnotation], 10, 32)
	return v
}

// rebalancer evicts at most one pod per template per interval.
type rebalancer struct {
	client   client.Client
	clock    clock.PassiveClock
	interval time.Duration

	mu   sync.Mutex
	last map[types.UID]time.Time
}

// converge evicts the next pod that should move, if its template may
// move one now; it returns how long to wait before looking again (0: the
// template is where its decision says). pods are the template's live pods.
func (r *policyReconciler) converge(ctx context.Context, tpl Template, pl *placement, pods []*corev1.Pod) (time.Duration, error) {
	obj, kind, err := getTemplate(ctx, r.client, tpl)
	if err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	replicas, _ := kind.Pods(obj)
	if rollingOut(obj, replicas) {
		// Its controller is replacing pods under its own availability
		// budget; an eviction now would take one more.
		return r.rebalance.interval, nil
	}
	if pl.decision.Mode == policyv1alpha1.ReplicaSchedulingTypeDuplicated {
		replicas = 0 // copies run their own replicas; only misplaced pods move
	}
	m := nextMove(pl.decision, replicas, pods)
	if m == nil {
		return 0, nil
	}
	rb := r.rebalance
	rb.mu.Lock()
	wait := rb.interval - rb.clock.Since(rb.last[tpl.UID])
	if wait > 0 {
		rb.mu.Unlock()
		return wait, nil
	}
	rb.last[tpl.UID] = rb.clock.Now()
	rb.mu.Unlock()
	err = r.client.SubResource("eviction").Create(ctx, m.pod, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: m.pod.Name, Namespace: m.pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &m.pod.UID}},
	})
	switch {
	case apierrors.IsTooManyRequests(err):
		// A PodDisruptionBudget does not allow it now.
		return rb.interval, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return rb.interval, nil
	case err != nil:
		return 0, fmt.Errorf("evict pod %s/%s: %w", m.pod.Namespace, m.pod.Name, err)
	}
	r.recorder.Eventf(obj, m.pod, corev1.EventTypeNormal, wellknown.EventRebalanced, "Evict",
		"Evicted pod %s from cluster %s: %s; %s places its replacement", m.pod.Name, m.from, m.why, pl.policy)
	return rb.interval, nil
}

// rollingOut reports whether obj's controller is replacing its pods. It
// does so under its own availability budget (maxUnavailable, or one pod at
// a time), which counts only the pods it deletes: an eviction in the
// middle of it — at the moment all pods are Ready but one new pod runs in
// a cluster above its share — would take one more than the user allowed.
// A Deployment whose rollout has stalled (ProgressDeadlineExceeded) is not
// rolling out: placement does not wait on it for ever.
func rollingOut(obj client.Object, replicas int32) bool {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		for _, c := range o.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse {
				return false
			}
		}
		s := o.Status
		return s.ObservedGeneration < o.Generation || s.UpdatedReplicas < replicas || s.Replicas > s.UpdatedReplicas
	case *appsv1.StatefulSet:
		s := o.Status
		return s.ObservedGeneration < o.Generation || (s.UpdateRevision != "" && s.CurrentRevision != s.UpdateRevision)
	}
	return false
}

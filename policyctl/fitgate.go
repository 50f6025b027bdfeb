package policyctl

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
)

// gatedIndex indexes the pods held by the fit gate.
const gatedIndex = "flotilla.io/fit-gated"

// fitGate releases the pods the fit gate holds once a cluster can run
// them, and until then keeps on each the answer of every cluster (an
// Event and wellknown.FitVerdictAnnotation) so that `kubectl describe pod` says why
// it waits. It is level-based: every change of a virtual node (its model)
// checks every held pod again.
type fitGate struct {
	client   ctrl.Client
	fitter   *fitter
	recorder events.EventRecorder
	// recheck is how soon a held pod is checked again without a node
	// change: a refusal's cooldown ends without one.
	recheck time.Duration
	// leading reports whether this replica leads; only the leader
	// reports bindings, so a pair does not say everything twice. Nil
	// means it does.
	leading func() bool
}

// Reconcile checks one held pod.
func (g *fitGate) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := g.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	if !gated(pod) || pod.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	f, err := g.fitter.evaluate(ctx, pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	fits := f.targets()
	if len(fits) == 0 {
		msg := f.verdict()
		if len(f.candidates) == 0 {
			msg = "no cluster's taints are tolerated by this pod"
		}
		if pod.Annotations[wellknown.FitVerdictAnnotation] != msg {
			next := pod.DeepCopy()
			setAnnotation(next, wellknown.FitVerdictAnnotation, msg)
			if err := g.client.Update(ctx, next); err != nil {
				return reconcile.Result{}, ctrl.IgnoreNotFound(err)
			}
			g.recorder.Eventf(next, nil, corev1.EventTypeWarning, wellknown.EventNoClusterFits, "Place", "waiting in the host: %s", msg)
		}
		return reconcile.Result{RequeueAfter: g.recheck}, nil
	}
	to := f.sendTo()
	if to != "" && len(pod.Spec.SchedulingGates) > 1 {
		// Another gate holds it too, and a gated pod cannot be bound:
		// its removal brings the pod back here.
		return reconcile.Result{RequeueAfter: g.recheck}, nil
	}
	next := pod.DeepCopy()
	release(next, fits)
	switch {
	case to != "" && to == f.member:
		setAnnotation(next, wellknown.PreemptingInAnnotation, to)
	case to != "":
		setAnnotation(next, wellknown.WaitingForNodeAnnotation, to)
	}
	if len(f.fits) == 0 && (len(f.preempting) > 0 || f.member != "") {
		// A scheduler preempts; until it has, its own message says
		// where the pod waits, and this one why it was let go.
		setAnnotation(next, wellknown.FitVerdictAnnotation, f.verdict())
	}
	if err := g.client.Update(ctx, next); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	if len(f.fits) > 0 {
		g.recorder.Eventf(next, nil, corev1.EventTypeNormal, wellknown.EventClusterFits, "Place", "can run in %s now", strings.Join(fits, ", "))
		return reconcile.Result{}, nil
	}
	if to == "" {
		g.recorder.Eventf(next, nil, corev1.EventTypeNormal, wellknown.EventClusterFits, "Place",
			"can run in %s by preempting lower-priority pods; left to the host scheduler's preemption", strings.Join(fits, ", "))
		return reconcile.Result{}, nil
	}
	// The sum of cluster to is full for the host scheduler: the member's
	// own pods in the way, or a node yet to come. Bind as a scheduler
	// would, for the member's scheduler to preempt, or for the pod to
	// wait in the member where the autoscaler sees it.
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: next.Name, Namespace: next.Namespace, UID: next.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: to}}
	if err := g.client.SubResource("binding").Create(ctx, next, binding); err != nil && !apierrors.IsConflict(err) {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	if to == f.member {
		g.recorder.Eventf(next, nil, corev1.EventTypeNormal, wellknown.EventPreemptingInMember, "Place", preemptingInMessage, to, f.verdict())
		return reconcile.Result{}, nil
	}
	g.recorder.Eventf(next, nil, corev1.EventTypeNormal, wellknown.EventWaitingForNode, "Place", "no node of any cluster fits it now; sent to %s, which can add a node for it: %s", to, f.verdict())
	return reconcile.Result{}, nil
}

// preemptingInMessage is the message of the Event on a pod sent to a
// cluster whose scheduler preempts for it: the cluster, then the verdict.
const preemptingInMessage = "no cluster can run it now, nor by the host scheduler's preemption; sent to %s, whose scheduler can preempt lower-priority pods there for it: %s"

// heldPods lists the pods the gate holds, for a virtual node's change.
func (g *fitGate) heldPods(ctx context.Context) []reconcile.Request {
	var pods corev1.PodList
	if err := g.client.List(ctx, &pods, ctrl.MatchingFields{gatedIndex: "true"}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(pods.Items))
	for i := range pods.Items {
		out = append(out, reconcile.Request{NamespacedName: ctrl.ObjectKeyFromObject(&pods.Items[i])})
	}
	return out
}

// observe follows host pods for what flotilla-node and the scheduler did
// with them: a pod a member handed back (status reason
// MemberUnschedulable) keeps its controller's next pods off that cluster
// for a while; a pod that was kept off a cluster for that reason says
// where it went once bound; a pod the webhook sent to a cluster whose
// scheduler preempts for it says so once it exists.
func (g *fitGate) observe(old, cur *corev1.Pod) {
	if cur.Status.Phase == corev1.PodFailed && cur.Status.Reason == wellknown.ReasonMemberUnschedulable &&
		(old == nil || old.Status.Reason != wellknown.ReasonMemberUnschedulable) && cur.Spec.NodeName != "" {
		g.fitter.refusals.record(controllerUID(cur), cur.Spec.NodeName, cur.Status.Message)
	}
	if old == nil && sentAtCreation(cur) && (g.leading == nil || g.leading()) {
		// Bound by the webhook, before it had a UID for an Event.
		g.recorder.Eventf(cur, nil, corev1.EventTypeNormal, wellknown.EventPreemptingInMember, "Place", preemptingInMessage, cur.Spec.NodeName, cur.Annotations[wellknown.FitVerdictAnnotation])
	}
	if old != nil && old.Spec.NodeName == "" && cur.Spec.NodeName != "" && !podstate.Terminal(cur) && (g.leading == nil || g.leading()) {
		// Bound: say which clusters were left out, and why, where the
		// user looks (kubectl describe pod).
		if v := cur.Annotations[wellknown.FitVerdictAnnotation]; v != "" {
			reason := wellknown.EventLeftOut
			if strings.Contains(v, "handed back") {
				reason = wellknown.EventPlacedElsewhere
			}
			g.recorder.Eventf(cur, nil, corev1.EventTypeNormal, reason, "Place", "placed in %s; %s", cur.Spec.NodeName, v)
		}
	}
}

// sentAtCreation reports whether pod was bound when created to the
// cluster whose scheduler preempts for it, and nothing has reported on it
// since: a pod seen again on a restart has conditions by then.
func sentAtCreation(pod *corev1.Pod) bool {
	to := pod.Annotations[wellknown.PreemptingInAnnotation]
	return to != "" && to == pod.Spec.NodeName && len(pod.Status.Conditions) == 0 && !podstate.Terminal(pod)
}

// gatedValue is the value of gatedIndex for a pod.
func gatedValue(o ctrl.Object) []string {
	if p, ok := o.(*corev1.Pod); ok && gated(p) {
		return []string{"true"}
	}
	return nil
}

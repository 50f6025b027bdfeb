package policyctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/apis/policy/v1alpha1/validation"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/propagation"
	"flotilla.io/flotilla/workload"
)

// policyReconciler records, in a policy's status, the templates it places
// and where, reports templates it cannot place, and recreates pods of its
// templates that were admitted unplaced. It is level-based: whatever
// changed, it recomputes the whole status of one policy.
type policyReconciler struct {
	client    client.Client
	placer    *placer
	recorder  events.EventRecorder
	rebalance *rebalancer
	// newPolicy returns an empty policy of the reconciled kind.
	newPolicy func() client.Object
}

// reconcile recomputes one policy's status (see Reconcile).
func (r *policyReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := r.newPolicy()
	if err := r.client.Get(ctx, req.NamespacedName, pol); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	spec, status := specAndStatus(pol)
	var templates []policyv1alpha1.TemplatePlacement
	var problems []string
	var requeue time.Duration
	// A policy stored before flotilla-policy's webhook checked it (or while
	// the webhook was down) says in its status what is wrong with it, e.g.
	// a DaemonSet selector, which no template ever matches.
	invalid := validate(pol)
	for _, e := range invalid {
		problems = append(problems, e.Error())
	}
	selected, err := r.selected(ctx, pol, spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, tpl := range selected {
		c, err := r.placer.policyFor(ctx, tpl)
		if errors.Is(err, errNotSelected) || (err == nil && c.obj.GetUID() != pol.GetUID()) {
			continue // another policy wins it
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		pl, err := r.placer.placement(ctx, tpl)
		var unschedulable *propagation.Unschedulable
		switch {
		case errors.As(err, &unschedulable):
			problems = append(problems, fmt.Sprintf("%s: %s", tpl, err))
			if obj, _, gerr := getTemplate(ctx, r.client, tpl); gerr == nil {
				r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, wellknown.EventPlacementFailed, "Place",
					"%s cannot place it: %s", pl.policy, err)
			}
		case err != nil:
			return ctrl.Result{}, err
		}
		placed := err == nil
		tp := policyv1alpha1.TemplatePlacement{APIVersion: tpl.APIVersion, Kind: tpl.Kind, Namespace: tpl.Namespace, Name: tpl.Name}
		all, err := templatePods(ctx, r.client, tpl)
		if err != nil {
			return ctrl.Result{}, err
		}
		live := livePods(all)
		current := boundCounts(live)
		if pl != nil {
			for _, t := range pl.decision.Targets {
				tp.Clusters = append(tp.Clusters, policyv1alpha1.ClusterReplicas{Name: t.Cluster, DesiredReplicas: t.Replicas, CurrentReplicas: current[t.Cluster]})
			}
			if placed {
				if err := r.recreateUnplaced(ctx, tpl); err != nil {
					return ctrl.Result{}, err
				}
			}
		}
		var derivedFor []string
		if placed && pl.decision.Mode == policyv1alpha1.ReplicaSchedulingTypeDuplicated {
			derivedFor = pl.clusters()
		}
		if err := r.syncDerived(ctx, tpl, derivedFor); err != nil {
			return ctrl.Result{}, err
		}
		if placed {
			wait, err := r.converge(ctx, tpl, pl, live)
			if err != nil {
				return ctrl.Result{}, err
			}
			if wait > 0 && (requeue == 0 || wait < requeue) {
				requeue = wait
			}
		}
		templates = append(templates, tp)
	}
	slices.SortFunc(templates, func(a, b policyv1alpha1.TemplatePlacement) int {
		return strings.Compare(a.Kind+"/"+a.Namespace+"/"+a.Name, b.Kind+"/"+b.Namespace+"/"+b.Name)
	})
	next := status.DeepCopy()
	next.ObservedGeneration = pol.GetGeneration()
	next.Templates = templates
	next.MatchedTemplates = int32(len(templates))
	cond := metav1.Condition{Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: wellknown.ReasonPlaced,
		Message: fmt.Sprintf("%d templates placed", len(templates)), ObservedGeneration: pol.GetGeneration()}
	if len(problems) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, wellknown.EventPlacementFailed, strings.Join(problems, "; ")
		if len(invalid) > 0 {
			cond.Reason = wellknown.ReasonInvalidPolicy
		}
	}
	meta.SetStatusCondition(&next.Conditions, cond)
	if equality.Semantic.DeepEqual(next, status) {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	*status = *next
	if err := r.client.Status().Update(ctx, pol); err != nil && !apierrors.IsConflict(err) {
		return ctrl.Result{}, fmt.Errorf("update status of %s: %w", candidate{obj: pol}.ref(), err)
	} else if err != nil {
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func specAndStatus(pol client.Object) (*policyv1alpha1.PropagationSpec, *policyv1alpha1.PropagationPolicyStatus) {
	switch p := pol.(type) {
	case *policyv1alpha1.PropagationPolicy:
		return &p.Spec, &p.Status
	case *policyv1alpha1.ClusterPropagationPolicy:
		return &p.Spec, &p.Status
	}
	panic(fmt.Sprintf("policyctl: %T is not a propagation policy", pol))
}

// selected lists the templates any of the policy's selectors matches.
func (r *policyReconciler) selected(ctx context.Context, pol client.Object, spec *policyv1alpha1.PropagationSpec) ([]Template, error) {
	var out []Template
	seen := map[TemplateKey]bool{}
	c := candidate{obj: pol, spec: spec}
	for _, sel := range spec.ResourceSelectors {
		k, ok := workload.Lookup(sel.APIVersion, sel.Kind)
		if !ok {
			continue
		}
		gvk := k.GroupVersionKind()
		list := k.NewList()
		var opts []client.ListOption
		if ns := pol.GetNamespace(); ns != "" {
			opts = append(opts, client.InNamespace(ns))
		} else if sel.Namespace != "" {
			opts = append(opts, client.InNamespace(sel.Namespace))
		}
		if err := r.client.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		for _, obj := range k.Items(list) {
			t := templateOf(obj, sel.APIVersion, gvk.Kind)
			if seen[t.Key()] || !c.selects(t) || obj.GetDeletionTimestamp() != nil ||
				obj.GetAnnotations()[wellknown.DerivedAnnotation] != "" {
				continue
			}
			if k.PodTemplatePath() == "" && metav1.GetControllerOf(obj) != nil {
				continue // a workload's pod, placed with its workload
			}
			seen[t.Key()] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// validate checks a stored propagation policy as the webhook checks new
// ones.
func validate(pol client.Object) field.ErrorList {
	switch p := pol.(type) {
	case *policyv1alpha1.PropagationPolicy:
		return validation.ValidatePropagationPolicy(p)
	case *policyv1alpha1.ClusterPropagationPolicy:
		return validation.ValidateClusterPropagationPolicy(p)
	}
	return nil
}

// boundCounts counts the live pods bound to each cluster.
func boundCounts(pods []*corev1.Pod) map[string]int32 {
	out := map[string]int32{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

// recreateUnplaced deletes the template's pods that were admitted without
// a placement (the webhook was unavailable, or the template could not be
// placed then) and are not scheduled, so their controller recreates them
// through the webhook. A bare pod has no controller to recreate it and is
// left alone: it waits Pending and its template carries the event.
func (r *policyReconciler) recreateUnplaced(ctx context.Context, tpl Template) error {
	if tpl.Kind == "Pod" {
		return nil
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(tpl.Namespace)); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != "" || podstate.Leaving(p) || p.Annotations[wellknown.TemplateAnnotation] != "" {
			continue
		}
		owner, err := TemplateOf(ctx, r.client, p)
		if err != nil || owner.UID != tpl.UID {
			continue
		}
		if err := r.client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete unplaced pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if obj, _, err := getTemplate(ctx, r.client, tpl); err == nil {
			r.recorder.Eventf(obj, p, corev1.EventTypeNormal, wellknown.EventUnplacedPodRecreated, "Delete",
				"Pod %s was admitted without a placement and is recreated through the placement webhook", p.Name)
		}
	}
	return nil
}

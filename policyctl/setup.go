// This file wires the policy API into a controller-runtime manager: pod
// indexes, the watches that drop per-template state with its template, the
// propagation policy controllers, the fit gate and the webhooks.

package policyctl

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/workload"
)

// Webhook paths served by flotilla-policy.
const (
	// PodWebhookPath is the mutating webhook for pod creation.
	PodWebhookPath = "/mutate-v1-pod"
	// PolicyWebhookPath is the validating webhook for the policy kinds.
	PolicyWebhookPath = "/validate-policy-flotilla-io-v1alpha1"
)

// Options tune the policy controller.
type Options struct {
	// RebalanceInterval is the least time between two evictions that move
	// one template's replicas toward its decision.
	RebalanceInterval time.Duration
	// RefusalCooldown is how long a cluster that handed back a pod gets
	// no pod of the same controller (default 2m).
	RefusalCooldown time.Duration
}

// Setup registers the policy reconcilers and webhooks with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, log logrus.FieldLogger, opts Options) error {
	if opts.RebalanceInterval <= 0 {
		opts.RebalanceInterval = 10 * time.Second
	}
	if opts.RefusalCooldown <= 0 {
		opts.RefusalCooldown = 2 * time.Minute
	}
	if err := indexPods(ctx, mgr); err != nil {
		return err
	}
	pl := newPlacer(mgr.GetCache())
	recorder := mgr.GetEventRecorder("flotilla-policy")
	rb := &rebalancer{client: mgr.GetClient(), clock: clock.RealClock{}, interval: opts.RebalanceInterval, last: map[types.UID]time.Time{}}
	lg := newLedger(clock.RealClock{})
	// What the placer, rebalancer and ledger keep per template goes with
	// the template (a bare pod is its own template).
	if err := watchTemplateDeletions(ctx, mgr, forgetDeleted(pl, rb, lg)); err != nil {
		return err
	}
	if err := watchPlacedPods(ctx, mgr, lg); err != nil {
		return err
	}
	for _, kind := range propagationPolicyKinds(mgr, log) {
		r := &policyReconciler{client: mgr.GetClient(), placer: pl, recorder: recorder, rebalance: rb, newPolicy: kind.newPolicy}
		if err := setupPolicyController(mgr, kind, r); err != nil {
			return err
		}
	}
	fitter := newFitter(mgr.GetCache(), clock.RealClock{}, opts.RefusalCooldown)
	if err := setupFitGate(ctx, mgr, fitter, recorder, opts.RefusalCooldown/2); err != nil {
		return err
	}
	registerWebhooks(mgr, log, pl, lg, fitter)
	return setupHostVersionCheck(mgr, log, recorder)
}

// setupHostVersionCheck has the leader check the host's Kubernetes
// version when it starts leading.
func setupHostVersionCheck(mgr ctrl.Manager, log logrus.FieldLogger, recorder events.EventRecorder) error {
	d, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("host discovery client: %w", err)
	}
	return mgr.Add(&hostVersionCheck{
		version: func(ctx context.Context) (string, error) {
			v, err := d.ServerVersionWithContext(ctx)
			if err != nil {
				return "", err
			}
			return v.GitVersion, nil
		},
		reader: mgr.GetAPIReader(), recorder: recorder, log: log.WithField("component", "host-version"),
	})
}

// indexPods indexes the cached pods by template, by node and by whether
// the fit gate holds them.
func indexPods(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, templateIndex, func(o client.Object) []string {
		if uid := o.GetAnnotations()[wellknown.TemplateAnnotation]; uid != "" {
			return []string{uid}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index pods by template: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, nodeIndex, func(o client.Object) []string {
		if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, gatedIndex, gatedValue); err != nil {
		return fmt.Errorf("index pods held by the fit gate: %w", err)
	}
	return nil
}

// watchTemplateDeletions hands forget the deletion of every workload
// template.
func watchTemplateDeletions(ctx context.Context, mgr ctrl.Manager, forget toolscache.ResourceEventHandler) error {
	for _, k := range workload.All() {
		inf, err := mgr.GetCache().GetInformer(ctx, k.New())
		if err != nil {
			return fmt.Errorf("informer for %s: %w", k.GroupVersionKind().Kind, err)
		}
		if _, err := inf.AddEventHandler(forget); err != nil {
			return fmt.Errorf("watch %s deletions: %w", k.GroupVersionKind().Kind, err)
		}
	}
	return nil
}

// watchPlacedPods tells the ledger of every pod that arrives with an
// assignment.
func watchPlacedPods(ctx context.Context, mgr ctrl.Manager, lg *ledger) error {
	pods, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
		if p, ok := o.(*corev1.Pod); ok && p.Annotations[wellknown.AssignmentAnnotation] != "" {
			lg.arrived(types.UID(p.Annotations[wellknown.TemplateAnnotation]), p.Annotations[wellknown.AssignmentAnnotation])
		}
	}}); err != nil {
		return fmt.Errorf("watch placed pods: %w", err)
	}
	return nil
}

// policyKind is a kind of propagation policy: its controller's name, a new
// policy of it, and the policies to recompute after a change in a
// namespace ("" for all).
type policyKind struct {
	name      string
	newPolicy func() client.Object
	list      func(ctx context.Context, namespace string) []reconcile.Request
}

// propagationPolicyKinds are PropagationPolicy and ClusterPropagationPolicy,
// listed from mgr's cache.
func propagationPolicyKinds(mgr ctrl.Manager, log logrus.FieldLogger) []policyKind {
	return []policyKind{
		{"propagationpolicy", func() client.Object { return &policyv1alpha1.PropagationPolicy{} }, func(ctx context.Context, ns string) []reconcile.Request {
			var l policyv1alpha1.PropagationPolicyList
			if err := mgr.GetCache().List(ctx, &l, client.InNamespace(ns)); err != nil {
				log.WithError(err).WithField("namespace", ns).Error("cannot list PropagationPolicies to recompute after a change; they are recomputed on their next event")
				return nil
			}
			return requests(objects(l.Items))
		}},
		{"clusterpropagationpolicy", func() client.Object { return &policyv1alpha1.ClusterPropagationPolicy{} }, func(ctx context.Context, _ string) []reconcile.Request {
			var l policyv1alpha1.ClusterPropagationPolicyList
			if err := mgr.GetCache().List(ctx, &l); err != nil {
				log.WithError(err).Error("cannot list ClusterPropagationPolicies to recompute after a change; they are recomputed on their next event")
				return nil
			}
			return requests(objects(l.Items))
		}},
	}
}

// setupPolicyController registers r as kind's controller, recomputing the
// kind's policies when a virtual node, a pod or a workload controller
// changes.
func setupPolicyController(mgr ctrl.Manager, kind policyKind, r *policyReconciler) error {
	byNamespace := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return kind.list(ctx, o.GetNamespace())
	})
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if n, ok := o.(*corev1.Node); ok && !isVirtualNode(n) {
			return nil
		}
		return kind.list(ctx, "")
	})
	b := ctrl.NewControllerManagedBy(mgr).Named(kind.name).For(kind.newPolicy()).
		Watches(&corev1.Node{}, all).
		// Pods change templates' current replicas, and a pod admitted
		// unplaced must be recreated.
		Watches(&corev1.Pod{}, byNamespace)
	for _, k := range workload.Controllers() {
		b = b.Watches(k.New(), byNamespace)
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("set up %s controller: %w", kind.name, err)
	}
	return nil
}

// registerWebhooks serves the pod placer and the policy validator.
func registerWebhooks(mgr ctrl.Manager, log logrus.FieldLogger, pl *placer, lg *ledger, f *fitter) {
	hook := mgr.GetWebhookServer()
	hook.Register(PodWebhookPath, &webhook.Admission{Handler: &PodPlacer{
		cache: mgr.GetCache(), placer: pl, ledger: lg, fitter: f,
		decoder: admission.NewDecoder(mgr.GetScheme()), log: log.WithField("webhook", "pod"),
	}})
	hook.Register(PolicyWebhookPath, &webhook.Admission{Handler: &PolicyValidator{decoder: admission.NewDecoder(mgr.GetScheme())}})
}

func requests(objs []client.Object) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(objs))
	for _, o := range objs {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	return out
}

// setupFitGate registers the controller that releases the pods the fit
// gate holds, and the observer of handed-back pods.
func setupFitGate(ctx context.Context, mgr ctrl.Manager, f *fitter, recorder events.EventRecorder, recheck time.Duration) error {
	g := &fitGate{client: mgr.GetClient(), fitter: f, recorder: recorder, recheck: recheck, leading: func() bool {
		select {
		case <-mgr.Elected():
			return true
		default:
			return false
		}
	}}
	pods, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				g.observe(nil, p)
			}
		},
		UpdateFunc: func(o, n any) {
			op, ok1 := o.(*corev1.Pod)
			np, ok2 := n.(*corev1.Pod)
			if ok1 && ok2 {
				g.observe(op, np)
			}
		},
	}); err != nil {
		return fmt.Errorf("watch handed-back pods: %w", err)
	}
	nodes, err := mgr.GetCache().GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return fmt.Errorf("node informer: %w", err)
	}
	if _, err := nodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if n, ok := o.(*corev1.Node); ok {
				f.forgetNode(n.Name)
			}
		},
	}); err != nil {
		return fmt.Errorf("watch node deletions: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).Named("fitgate").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			p, ok := o.(*corev1.Pod)
			return ok && gated(p)
		}))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if n, ok := o.(*corev1.Node); !ok || !isVirtualNode(n) {
				return nil
			}
			return g.heldPods(ctx)
		})).
		Complete(g)
}

package policyctl

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/apis/policy/v1alpha1/validation"
	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

// reconcilerFor runs a propagation policy reconciler over objs.
func reconcilerFor(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) (*policyReconciler, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&policyv1alpha1.PropagationPolicy{}).
		WithIndex(&corev1.Pod{}, nodeIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Pod{}, templateIndex, func(o client.Object) []string { return []string{o.GetAnnotations()[wellknown.TemplateAnnotation]} }).
		WithInterceptorFuncs(funcs).
		Build()
	r := &policyReconciler{client: c, placer: newPlacer(c), recorder: events.NewFakeRecorder(100),
		rebalance: &rebalancer{client: c, clock: clock.RealClock{}, last: map[types.UID]time.Time{}},
		newPolicy: func() client.Object { return &policyv1alpha1.PropagationPolicy{} }}
	return r, c
}

func webPolicy(selectors ...policyv1alpha1.ResourceSelector) *policyv1alpha1.PropagationPolicy {
	return &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "pol", Generation: 1},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: selectors,
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"beijing"}}},
		},
	}
}

var deploymentSelector = policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}

// TestStoredDaemonSetPolicyIsNotReady: a policy stored with a DaemonSet
// selector (before the webhook refused them) says so in its Ready
// condition, and still places the templates it validly selects.
func TestStoredDaemonSetPolicyIsNotReady(t *testing.T) {
	pol := webPolicy(deploymentSelector, policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "node-exporter"})
	web := builder.Deployment("web").Namespace("shop").UID("dep").Replicas(2).Obj()
	bj := builder.VirtualNode("beijing").CPU("64").Pods("1000").Ready().Obj()
	r, c := reconcilerFor(t, interceptor.Funcs{}, pol, web, bj)
	if _, err := r.reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pol)}); err != nil {
		t.Fatal(err)
	}
	got := &policyv1alpha1.PropagationPolicy{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(pol), got); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, policyv1alpha1.ConditionReady)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != wellknown.ReasonInvalidPolicy || !strings.Contains(cond.Message, validation.MsgDaemonSet) {
		t.Errorf("Ready condition = %+v, want False/%s saying %q", cond, wellknown.ReasonInvalidPolicy, validation.MsgDaemonSet)
	}
	if len(got.Status.Templates) != 1 || got.Status.Templates[0].Name != "web" || len(got.Status.Templates[0].Clusters) != 1 {
		t.Errorf("templates = %+v, want Deployment web placed on beijing", got.Status.Templates)
	}
}

// TestReadErrorsKeepStatus: when the templates or the policies cannot be
// read, the reconcile fails and is retried; the status is not rewritten
// without the template (a failed policy read is not "another policy wins").
func TestReadErrorsKeepStatus(t *testing.T) {
	for name, failing := range map[string]client.ObjectList{
		"templates": &appsv1.DeploymentList{},
		"policies":  &policyv1alpha1.ClusterPropagationPolicyList{},
	} {
		t.Run(name, func(t *testing.T) {
			pol := webPolicy(deploymentSelector)
			web := builder.Deployment("web").Namespace("shop").UID("dep").Replicas(2).Obj()
			bj := builder.VirtualNode("beijing").CPU("64").Pods("1000").Ready().Obj()
			fail := false
			r, c := reconcilerFor(t, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if fail && reflect.TypeOf(list) == reflect.TypeOf(failing) {
					return errors.New("the server is currently unable to handle the request")
				}
				return c.List(ctx, list, opts...)
			}}, pol, web, bj)
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pol)}
			if _, err := r.reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			fail = true
			if _, err := r.reconcile(t.Context(), req); err == nil {
				t.Errorf("reconcile succeeded although the %s could not be read", name)
			}
			got := &policyv1alpha1.PropagationPolicy{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(pol), got); err != nil {
				t.Fatal(err)
			}
			if got.Status.MatchedTemplates != 1 || len(got.Status.Templates) != 1 {
				t.Errorf("status lost its template after a failed read of the %s: %+v", name, got.Status)
			}
		})
	}
}

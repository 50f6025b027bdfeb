package policyctl

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/builder"
)

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := policyv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTemplateChurnLeavesNoState places, evicts for and assigns pods of
// 10,000 templates that then go away, and checks that the placer, the
// rebalancer and the ledger are left holding nothing of them.
func TestTemplateChurnLeavesNoState(t *testing.T) {
	const n = 10000
	ctx := context.Background()
	pol := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "pol"},
		Spec:       policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}}},
	}
	objs := []client.Object{pol, builder.VirtualNode("beijing").CPU("64").Pods("1000").Ready().Obj(), builder.VirtualNode("hangzhou").CPU("64").Pods("1000").Ready().Obj()}
	deployments := make([]*appsv1.Deployment, n)
	for i := range deployments {
		deployments[i] = builder.Deployment(fmt.Sprintf("web-%d", i)).Namespace("shop").UID(fmt.Sprintf("tpl-%d", i)).Obj()
		objs = append(objs, deployments[i])
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, nodeIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		Build()

	pl := newPlacer(c)
	clock := clocktesting.NewFakePassiveClock(time.Unix(1e9, 0))
	rb := &rebalancer{clock: clock, interval: time.Second, last: map[types.UID]time.Time{}}
	lg := newLedger(clock)
	for _, d := range deployments {
		tpl := templateOf(d, "apps/v1", "Deployment")
		if _, err := pl.placement(ctx, tpl); err != nil {
			t.Fatalf("place %s: %v", tpl, err)
		}
		rb.last[tpl.UID] = clock.Now()
		lg.reserve(tpl.UID, "a-"+string(tpl.UID), liveView{}, to("beijing"), byRank)
	}
	if len(pl.decisions) != n || len(rb.last) != n || len(lg.pending) != n {
		t.Fatalf("after placing: %d decisions, %d evictions, %d ledger entries; want %d each", len(pl.decisions), len(rb.last), len(lg.pending), n)
	}

	h := forgetDeleted(pl, rb, lg)
	for i, d := range deployments {
		if i%2 == 0 {
			h.OnDelete(d)
		} else {
			// A deletion the informer saw only as a tombstone.
			h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "shop/" + d.Name, Obj: d})
		}
	}
	if len(pl.decisions) != 0 || len(rb.last) != 0 || len(lg.pending) != 0 {
		t.Errorf("after deleting every template: %d decisions, %d evictions, %d ledger entries; want none", len(pl.decisions), len(rb.last), len(lg.pending))
	}
}

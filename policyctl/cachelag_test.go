package policyctl

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sirupsen/logrus"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
)

// laggingCache shows a deleted pod in its template's pod lists until it
// has been listed stale times more: a cache that has not seen the
// deletion yet.
type laggingCache struct {
	client.Reader
	mu      sync.Mutex
	deleted string
	stale   int
	lists   int
}

func (c *laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	pods, ok := list.(*corev1.PodList)
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if !ok || o.FieldSelector == nil || !strings.Contains(o.FieldSelector.String(), templateIndex) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists++
	if c.deleted == "" || c.stale > 0 {
		c.stale--
		return nil
	}
	kept := pods.Items[:0]
	for _, p := range pods.Items {
		if p.Name != c.deleted {
			kept = append(kept, p)
		}
	}
	pods.Items = kept
	return nil
}

// TestReplacementWaitsForTheCache: a replica deleted by hand is replaced
// by its ReplicaSet before the webhook's cache shows it gone. The
// replacement must take the departed replica's rank (its cluster and
// pod-deletion-cost), not the rank after the last, or the next scale-down
// deletes it instead of the replica the decision wants gone. The admission
// waits for the cache to catch up; a rollout's new revision does not.
func TestReplacementWaitsForTheCache(t *testing.T) {
	pol := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "pol"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
					{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"beijing"}}, Weight: 2},
					{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"hangzhou"}}, Weight: 1},
				}},
			}},
		},
	}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "dep"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](6)}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "rs",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "dep", Controller: ptr.To(true)}}}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(pol, virtualNode("beijing"), virtualNode("hangzhou"), web, rs).
		WithIndex(&corev1.Pod{}, nodeIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Pod{}, templateIndex, func(o client.Object) []string { return []string{o.GetAnnotations()[TemplateAnnotation]} }).
		Build()
	cache := &laggingCache{Reader: c}
	h := &PodPlacer{cache: cache, placer: newPlacer(cache), ledger: newLedger(clocktesting.NewFakeClock(time.Now())),
		decoder: admission.NewDecoder(testScheme(t)), log: logrus.NewEntry(logrus.New())}
	admit := func(hash string) *corev1.Pod {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-1-", Namespace: "shop",
			Labels:          map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		resp := h.handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: "shop", Object: runtime.RawExtension{Raw: raw},
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		}})
		placed, err := patched(raw, resp)
		if err != nil {
			t.Fatal(err)
		}
		return placed
	}
	// Six replicas, 4 in beijing and 2 in hangzhou, each cached as it is
	// created.
	var pods []*corev1.Pod
	for i := range 6 {
		p := admit("h1")
		p.Name = "web-1-" + string(rune('a'+i))
		if err := c.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	var victim *corev1.Pod
	for _, p := range pods {
		if p.Annotations[ClusterAnnotation] == "beijing" && (victim == nil || deletionCost(p) > deletionCost(victim)) {
			victim = p // the beijing replica a scale-down would delete last
		}
	}
	// Deleted by hand: gone from the API, still in the cache for three
	// more lists.
	if err := c.Delete(t.Context(), victim); err != nil {
		t.Fatal(err)
	}
	cache.mu.Lock()
	cache.deleted, cache.stale, cache.lists = victim.Name, 3, 0
	cache.mu.Unlock()
	// The fake client no longer has the victim; show it to the webhook
	// while the cache lags, as a real cache would.
	cache.Reader = withPod{Reader: c, pod: victim}

	repl := admit("h1")
	if repl.Annotations[ClusterAnnotation] != "beijing" || repl.Annotations[DeletionCostAnnotation] != victim.Annotations[DeletionCostAnnotation] {
		t.Errorf("replacement placed in %s with pod-deletion-cost %s, want the departed replica's: beijing, %s",
			repl.Annotations[ClusterAnnotation], repl.Annotations[DeletionCostAnnotation], victim.Annotations[DeletionCostAnnotation])
	}

	// A rollout's first pod of a new revision, with every old one still
	// there: no waiting for a deletion that is not coming.
	cache.mu.Lock()
	cache.deleted, cache.lists = "", 0
	cache.mu.Unlock()
	cache.Reader = c
	repl.Name = "web-1-repl"
	if err := c.Create(t.Context(), repl); err != nil {
		t.Fatal(err)
	}
	admit("h2")
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if cache.lists != 1 {
		t.Errorf("the admission of a new revision listed the template's pods %d times, want once", cache.lists)
	}
}

// withPod adds pod to the pod lists of its namespace.
type withPod struct {
	client.Reader
	pod *corev1.Pod
}

func (w withPod) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := w.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if pods, ok := list.(*corev1.PodList); ok && (&client.ListOptions{}).ApplyOptions(opts).Namespace == w.pod.Namespace {
		pods.Items = append(pods.Items, *w.pod)
	}
	return nil
}

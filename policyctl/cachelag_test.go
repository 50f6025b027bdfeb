package policyctl

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
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
	c := twoToOne(t, 6)
	cache := &laggingCache{Reader: c}
	h := newTestPlacer(t, cache)
	admit := func(hash string) *corev1.Pod {
		t.Helper()
		replica := builder.Pod("").GenerateName("web-1-").Namespace("shop").Label(appsv1.DefaultDeploymentUniqueLabelKey, hash).
			ControlledBy("ReplicaSet", "web-1", "rs").Container("c").Image("img").Obj()
		raw, err := json.Marshal(replica)
		if err != nil {
			t.Fatal(err)
		}
		placed, err := admitCreate(t.Context(), h, raw)
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
		if p.Annotations[wellknown.PolicyClusterAnnotation] == "beijing" && (victim == nil || deletionCost(p) > deletionCost(victim)) {
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
	if repl.Annotations[wellknown.PolicyClusterAnnotation] != "beijing" || repl.Annotations[wellknown.DeletionCostAnnotation] != victim.Annotations[wellknown.DeletionCostAnnotation] {
		t.Errorf("replacement placed in %s with pod-deletion-cost %s, want the departed replica's: beijing, %s",
			repl.Annotations[wellknown.PolicyClusterAnnotation], repl.Annotations[wellknown.DeletionCostAnnotation], victim.Annotations[wellknown.DeletionCostAnnotation])
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

package memberpod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/wellknown"
)

// TestListerReadsEitherForm: the lister reads a cache that holds Pods (the
// member pod cache, through its transform) or corev1.Pods (a cache
// without it) alike, tells a missing pod by a NotFound error, and a
// tombstone's pod is read as the pod.
func TestListerReadsEitherForm(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	raw := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "raw", UID: "m-1",
		Labels: map[string]string{"app": "web", wellknown.HostUIDLabel: "h-1"}}}
	cached := &Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "cached", UID: "m-2", Labels: map[string]string{"app": "web"}},
		HostUID: "h-2", Spec: &corev1.PodSpec{NodeName: "node-1"}}
	for _, obj := range []any{raw, cached} {
		if err := idx.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	l := Lister{Indexer: idx}
	for name, uid := range map[string]string{"raw": "h-1", "cached": "h-2"} {
		if p, err := l.Get("app", name); err != nil || string(p.HostUID) != uid || p.Spec == nil {
			t.Errorf("Get %s: %+v, %v; want host UID %s", name, p, err, uid)
		}
	}
	if _, err := l.Get("app", "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing pod: %v, want NotFound", err)
	}
	if pods, err := l.List(labels.SelectorFromSet(labels.Set{"app": "web"})); err != nil || len(pods) != 2 {
		t.Errorf("List: %d pods, %v; want 2", len(pods), err)
	}
	if p, ok := Of(cache.DeletedFinalStateUnknown{Key: "app/cached", Obj: cached}); !ok || p != cached {
		t.Errorf("a tombstone's pod: %v, %v", p, ok)
	}
	if p := cached.AsPod(); p.Spec.NodeName != "node-1" || p.Name != "cached" {
		t.Errorf("AsPod: %+v", p)
	}
}

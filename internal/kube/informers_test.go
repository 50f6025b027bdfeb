package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestFactory: one informer per type, every informer transformed, typed
// ones listing with the factory's options, listers per namespace, and an
// index added to one informer not showing up on another.
func TestFactory(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p1", Labels: map[string]string{"keep": "yes"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "p2", Labels: map[string]string{"keep": "yes"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "dropped"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"keep": "yes"}}},
	)
	f := NewFactory(client,
		WithTransform(func(o any) (any, error) {
			if m, ok := o.(metav1.Object); ok {
				m.SetManagedFields(nil)
			}
			return o, nil
		}),
		WithTweakListOptions(func(o *metav1.ListOptions) {
			if o.LabelSelector == "" {
				o.LabelSelector = "keep=yes"
			}
		}))
	if f.Pods().Informer() != f.Pods().Informer() {
		t.Fatal("two pod informers in one factory")
	}
	if err := f.Pods().Informer().AddIndexers(cache.Indexers{"by-name": func(o any) ([]string, error) {
		return []string{o.(metav1.Object).GetName()}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Nodes().Informer().GetIndexer().GetIndexers()["by-name"]; ok {
		t.Error("an index of the pod informer shows up on the node informer")
	}
	events := f.InformerFor(&corev1.Event{}, func(c Interface) cache.SharedIndexInformer {
		return NewInformer(c, &corev1.Event{}, "a", 0, nil, cache.Indexers{})
	})
	if f.InformerFor(&corev1.Event{}, nil) != events {
		t.Error("InformerFor built a second Event informer")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	f.Start(ctx.Done())
	if !f.WaitForCacheSync(ctx.Done()) {
		t.Fatal("caches did not sync")
	}
	all, err := f.Pods().Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Errorf("%d pods cached, want the 2 the list options select", len(all))
	}
	inA, err := f.Pods().Lister().Pods("a").List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(inA) != 1 || inA[0].Name != "p1" {
		t.Errorf("pods in namespace a: %v, want p1", inA)
	}
	if len(inA) == 1 && inA[0].ManagedFields != nil {
		t.Error("the transform did not run")
	}
	if _, err := f.Nodes().Lister().Get("n1"); err != nil {
		t.Errorf("node n1: %v", err)
	}
	cancel()
	done := make(chan struct{})
	go func() { f.Shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown did not return after the informers' stop")
	}
}

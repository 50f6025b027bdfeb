// This file tests that every change an informer sees reaches the queue.

package keyqueue

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestEnqueueEveryQueuesAddUpdateAndDelete: a created, changed and deleted
// object each put its namespace/name key on the queue.
func TestEnqueueEveryQueuesAddUpdateAndDelete(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().ConfigMaps().Informer()
	q := New("enqueue-test")
	defer q.ShutDown()
	if err := EnqueueEvery(informer, q); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)

	next := func(what string) {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			key, _ := q.Get()
			q.Done(key)
			got <- key
		}()
		select {
		case key := <-got:
			if key != "shop/web" {
				t.Fatalf("%s: queued %q, want shop/web", what, key)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing queued within 10s", what)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	cms := client.CoreV1().ConfigMaps("shop")
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	next("create")
	cm.Data = map[string]string{"k": "v"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	next("update")
	if err := cms.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next("delete")
}

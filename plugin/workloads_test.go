package plugin

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"flotilla.io/flotilla/internal/builder"
)

// TestCreateOwningWaitsPaused: the Deployment adopt and release create is
// paused, so that a controller that does not see its ReplicaSet's
// template yet makes no ReplicaSet, until the controller counts the
// ReplicaSet's pods as its own; then it is left as the user had it.
func TestCreateOwningWaitsPaused(t *testing.T) {
	for _, userPaused := range []bool{false, true} {
		c := fake.NewClientset()
		var createdPaused bool
		c.PrependReactor("create", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
			createdPaused = a.(k8stesting.CreateAction).GetObject().(*appsv1.Deployment).Spec.Paused
			return false, nil, nil
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// The controller finds the ReplicaSet a while after the
		// Deployment is created.
		go func() {
			for ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
				d, err := c.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					continue
				}
				d.Status.ObservedGeneration, d.Status.UpdatedReplicas = d.Generation, 7
				if _, err := c.AppsV1().Deployments("shop").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err == nil {
					return
				}
			}
		}()
		d := builder.Deployment("web").Namespace("shop").Replicas(7).Paused(userPaused).Obj()
		err := createOwning(ctx, c, d)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !createdPaused {
			t.Error("the Deployment was created unpaused: its controller may make a ReplicaSet of its own")
		}
		got, err := c.AppsV1().Deployments("shop").Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Paused != userPaused || got.Status.UpdatedReplicas != 7 {
			t.Errorf("paused %v with %d replicas updated, want paused %v once the 7 are", got.Spec.Paused, got.Status.UpdatedReplicas, userPaused)
		}
	}
}

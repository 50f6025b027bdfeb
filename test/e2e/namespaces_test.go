package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flotilla.io/flotilla/internal/wellknown"
)

// TestNamespaceLifecycle follows a host namespace into a member: created on
// first use with the host namespace's labels and annotations, kept in step
// with them, and deleted with the host namespace — while a member namespace
// that flotilla did not create is used but never modified or deleted.
func TestNamespaceLifecycle(t *testing.T) {
	const member = "beijing"
	hc, mc := hostClient(), memberClient(member)
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	owned, preexisting := "lifecycle-"+suffix, "preexisting-"+suffix

	for _, name := range []string{owned, preexisting} {
		_, err := hc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"team": "payments"}, Annotations: map[string]string{"owner": "alice"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range []string{owned, preexisting} {
			_ = hc.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = mc.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	theirs, err := mc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: preexisting, Labels: map[string]string{"made-by": "admin"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{owned, preexisting} {
		if _, err := hc.CoreV1().Pods(ns).Create(t.Context(), barePod(ns, "p", member), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPodReady(t, ns, "p")
	}

	memberNS := func(ctx context.Context, name string) (*corev1.Namespace, error) {
		return mc.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	}
	ns, err := memberNS(t.Context(), owned)
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["team"] != "payments" || ns.Annotations["owner"] != "alice" || ns.Labels[wellknown.ManagedByLabel] != wellknown.ManagedByValue {
		t.Errorf("member namespace %s: labels %v annotations %v", owned, ns.Labels, ns.Annotations)
	}

	patch := []byte(`{"metadata":{"labels":{"team":"risk"}}}`)
	for _, name := range []string{owned, preexisting} {
		if _, err := hc.CoreV1().Namespaces().Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "host namespace label change mirrored", func(ctx context.Context) (bool, string, error) {
		ns, err := memberNS(ctx, owned)
		if err != nil {
			return false, err.Error(), nil
		}
		return ns.Labels["team"] == "risk", fmt.Sprint(ns.Labels), nil
	})

	for _, name := range []string{owned, preexisting} {
		if err := hc.CoreV1().Namespaces().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, "member namespace flotilla created is deleted with its host namespace", func(ctx context.Context) (bool, string, error) {
		_, err := memberNS(ctx, owned)
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	eventually(t, 2*time.Minute, "the host namespace that used a pre-existing member namespace is gone", func(ctx context.Context) (bool, string, error) {
		_, err := hc.CoreV1().Namespaces().Get(ctx, preexisting, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	ns, err = memberNS(t.Context(), preexisting)
	if err != nil || ns.UID != theirs.UID || ns.DeletionTimestamp != nil || ns.Labels["made-by"] != "admin" || ns.Labels["team"] != "" {
		t.Errorf("pre-existing member namespace touched: err=%v ns=%+v", err, ns)
	}
}

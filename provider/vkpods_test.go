package provider

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestVirtualKubeletGetsCopies: what virtual-kubelet writes into a pod it
// got from the lister (as it does on a failed create) stays out of the
// cache every other reader shares.
func TestVirtualKubeletGetsCopies(t *testing.T) {
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Pods()
	cached := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", ResourceVersion: "7"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if err := inf.Informer().GetIndexer().Add(cached); err != nil {
		t.Fatal(err)
	}
	got, err := PodInformerForVirtualKubelet(inf).Lister().Pods("app").Get("web")
	if err != nil {
		t.Fatal(err)
	}
	got.ResourceVersion = ""
	got.Status.Phase = corev1.PodFailed
	if cached.ResourceVersion != "7" || cached.Status.Phase != corev1.PodRunning {
		t.Errorf("the cached pod was changed through the lister: resourceVersion %q, phase %s", cached.ResourceVersion, cached.Status.Phase)
	}
	if _, err := PodInformerForVirtualKubelet(inf).Lister().Pods("app").Get("gone"); err == nil {
		t.Error("a pod the cache does not hold was found")
	}
}

package flotillanode

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"flotilla.io/flotilla/internal/wellknown"
)

// TestRemoveLeavesOthersAlone removes one installation's virtual node from
// a member another installation also forwards into: its own pods, mirrors
// claims, host volumes and empty namespace go; the other installation's
// pods, claims and volumes, and the namespace both used, stay — the
// namespace handed back with an Event.
func TestRemoveLeavesOthersAlone(t *testing.T) {
	mine := wellknown.Owner{Cluster: "beijing", Installation: "host-b"}
	theirs := wellknown.Owner{Cluster: "beijing", Installation: "host-a"}
	hostPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "host-web-1"}, Spec: corev1.PodSpec{NodeName: "beijing"}}
	memberPod := func(ns, name string, o wellknown.Owner, hostUID string) *corev1.Pod {
		l := o.Stamp(nil)
		l[wellknown.HostUIDLabel] = hostUID
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("m-" + name), Labels: l}}
	}
	ns := func(name string, o wellknown.Owner) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("ns-" + name), Labels: o.Stamp(nil)}}
	}
	host := fake.NewClientset(hostPod, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "beijing"}})
	member := fake.NewClientset(
		ns("shop", mine), ns("mine-only", mine),
		memberPod("shop", "web-1", mine, "host-web-1"),
		memberPod("mine-only", "job-1", mine, "gone"),
		memberPod("shop", "api-1", theirs, "other-host-pod"),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-config", Labels: mine.Stamp(nil)}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-web-1", Labels: mine.Stamp(nil)}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-api-1", Labels: theirs.Stamp(nil)}},
	)
	for _, v := range []*corev1.PersistentVolume{
		{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-beijing-mine", Labels: mine.Stamp(nil)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-beijing-theirs", Labels: theirs.Stamp(nil)}},
	} {
		if _, err := host.CoreV1().PersistentVolumes().Create(t.Context(), v, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := Remove(t.Context(), RemoveConfig{HostClient: host, MemberClient: member, Installation: "host-b",
		Nodes: []string{"beijing"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := member.CoreV1().Pods("shop").Get(t.Context(), "api-1", metav1.GetOptions{}); err != nil {
		t.Errorf("the other installation's pod: %v", err)
	}
	for _, gone := range []struct{ ns, name string }{{"shop", "web-1"}, {"mine-only", "job-1"}} {
		if _, err := member.CoreV1().Pods(gone.ns).Get(t.Context(), gone.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("own member pod %s/%s: %v, want deleted", gone.ns, gone.name, err)
		}
	}
	if _, err := member.CoreV1().ConfigMaps("shop").Get(t.Context(), "web-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("own mirrored ConfigMap: %v, want deleted", err)
	}
	if _, err := member.CoreV1().PersistentVolumeClaims("shop").Get(t.Context(), "data-web-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("own member claim: %v, want deleted", err)
	}
	if _, err := member.CoreV1().PersistentVolumeClaims("shop").Get(t.Context(), "data-api-1", metav1.GetOptions{}); err != nil {
		t.Errorf("the other installation's claim: %v", err)
	}
	if _, err := host.CoreV1().PersistentVolumes().Get(t.Context(), "flotilla-beijing-mine", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("own host volume: %v, want deleted", err)
	}
	if _, err := host.CoreV1().PersistentVolumes().Get(t.Context(), "flotilla-beijing-theirs", metav1.GetOptions{}); err != nil {
		t.Errorf("the other installation's host volume: %v", err)
	}
	if _, err := member.CoreV1().Namespaces().Get(t.Context(), "mine-only", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("own emptied namespace: %v, want deleted", err)
	}
	shop, err := member.CoreV1().Namespaces().Get(t.Context(), "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("shared namespace: %v, want kept", err)
	}
	if mine.Owns(shop) || shop.Annotations[wellknown.ReleasedByAnnotation] != "host-b/beijing" {
		t.Errorf("shared namespace not handed back: %v %v", shop.Labels, shop.Annotations)
	}
	if _, err := host.CoreV1().Nodes().Get(t.Context(), "beijing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("virtual node: %v, want deleted", err)
	}
	if _, err := host.CoreV1().Pods("shop").Get(t.Context(), "web-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("host pod on the removed node: %v, want deleted for its controller to replace", err)
	}
}

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestUpgradeToNodeIdentity: an installation whose host role predates the
// virtual nodes' own identities (it may not act as them) gets a
// flotilla-node that refuses to start, saying what to grant, and touches
// nothing; once the role is granted, as a chart upgrade does, it adopts the
// running pod: neither the host pod nor the member pod is replaced.
func TestUpgradeToNodeIdentity(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	pod := create(t, hostClient().CoreV1().Pods(ns).Create, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kept"},
		Spec: corev1.PodSpec{NodeName: "beijing", Tolerations: []corev1.Toleration{virtualNodeToleration},
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	})
	member := waitForwardedReady(t, pod)

	if err := env.Node("beijing").Stop(); err != nil {
		t.Fatal(err)
	}
	if err := env.RevokeNodeRole(ctx, "beijing"); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	out, err := env.RunOnce(runCtx, "beijing")
	cancel()
	if err == nil {
		t.Fatalf("flotilla-node started without leave to act as its virtual node:\n%s", out)
	}
	if !strings.Contains(out, "may not impersonate users/system:node:beijing") || !strings.Contains(out, "helm upgrade") {
		t.Errorf("flotilla-node refused to start without saying what to grant:\n%s", out)
	}
	checkSamePods(t, pod.UID, member.UID)

	if _, err := env.StartNode("beijing"); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitNodeReady(ctx, "beijing", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Adopted, not replaced: the same pods, still running.
	waitForwardedReady(t, pod)
	checkSamePods(t, pod.UID, member.UID)
	// The new identity does the node's work: a deletion in the host ends
	// with the member pod gone and the host pod's deletion finished, which
	// only a write as the virtual node can do.
	if err := hostClient().CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := hostClient().CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("the deletion of the adopted pod was not finished after the upgrade: %v", err)
	}
}

// waitForwardedReady waits for host pod p to run Ready in its member and
// returns its member pod.
func waitForwardedReady(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	var member *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		h, err := hostClient().CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || !podReady(h) {
			return false, nil
		}
		member, err = memberPodOf(ctx, h)
		return err == nil && member != nil, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not running in its member: %v", p.Namespace, p.Name, err)
	}
	return member
}

// checkSamePods fails unless the host pod hostUID and the member pod
// memberUID both still exist.
func checkSamePods(t *testing.T, hostUID, memberUID types.UID) {
	t.Helper()
	hosts, err := hostClient().CoreV1().Pods(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=beijing"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, h := range hosts.Items {
		if h.UID == hostUID {
			found = h.DeletionTimestamp == nil
			m, err := memberPodOf(t.Context(), &h)
			if err != nil || m == nil || m.UID != memberUID {
				t.Errorf("host pod %s/%s: member pod %v (err %v), want the same one, %s", h.Namespace, h.Name, m, err, memberUID)
			}
		}
	}
	if !found {
		t.Errorf("host pod %s replaced or deleted", hostUID)
	}
}

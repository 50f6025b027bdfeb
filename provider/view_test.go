// This file tests that a pod virtual-kubelet hands back as a view is
// forwarded as the cache holds it.

package provider

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"flotilla.io/flotilla/internal/podcache"
)

// TestViewIsNeverForwarded: the provider forwards a view's pod as the cache
// holds it, whole; a view of a pod the cache no longer holds is not
// forwarded at all.
func TestViewIsNeverForwarded(t *testing.T) {
	w := newHarness(t)
	gone := boundPod("gone", func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
	})
	if err := w.p.CreatePod(w.ctx, podcache.VirtualKubeletView(gone)); err != nil {
		t.Fatal(err)
	}
	w.never("a view forwarded", 200*time.Millisecond, func() bool { return w.memberPodExists(testNamespace, "gone") })

	w.createHostPod(boundPod("whole", func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
	}))
	w.eventually("the pod forwarded", func() bool { return w.memberPodExists(testNamespace, "whole") })
	m, err := w.memberPod(testNamespace, "whole")
	if err != nil {
		t.Fatal(err)
	}
	if env := m.Spec.Containers[0].Env; len(env) != 1 || env[0].Value != "prod" || podcache.IsVirtualKubeletView(m) {
		t.Errorf("member pod forwarded from a view: env %v, scheduler %q", env, m.Spec.SchedulerName)
	}
}

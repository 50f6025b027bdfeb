// This file tests that the PriorityClasses forwarded pods name follow
// them into the member.

package provider

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

func withPriority(class string, value int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.PriorityClassName = class
		p.Spec.Priority = ptr.To(value)
		p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	}
}

// TestPriorityClassFollowsPods: a pod naming a class the member lacks is
// forwarded, the class made there with the host's value and never as the
// member's default; a class the member has with another value is kept,
// and the pod says so.
func TestPriorityClassFollowsPods(t *testing.T) {
	w := newHarness(t)
	if _, err := w.member.SchedulingV1().PriorityClasses().Create(w.ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Value: 5}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.createHostPod(boundPod("urgent", withPriority("urgent", 1000)))
	w.createHostPod(boundPod("urgent-2", withPriority("urgent", 1000)))
	w.createHostPod(boundPod("job", withPriority("batch", 100)))
	w.createHostPod(boundPod("critical", withPriority("system-cluster-critical", 2000000000)))
	for _, name := range []string{"urgent", "urgent-2", "job", "critical"} {
		w.eventually("member pod "+name, func() bool { return w.memberPodExists(testNamespace, name) })
	}
	m, err := w.member.SchedulingV1().PriorityClasses().Get(w.ctx, "urgent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Value != 1000 || m.GlobalDefault || m.Labels[wellknown.ManagedByLabel] != wellknown.ManagedByValue ||
		ptr.Deref(m.PreemptionPolicy, "") != corev1.PreemptLowerPriority {
		t.Errorf("the member's copy: value %d, default %v, labels %v, policy %v", m.Value, m.GlobalDefault, m.Labels, m.PreemptionPolicy)
	}
	if n := len(w.events.find("urgent", wellknown.EventPriorityClassCopied)) + len(w.events.find("urgent-2", wellknown.EventPriorityClassCopied)); n != 1 {
		t.Errorf("%d PriorityClassCopied events, want 1", n)
	}
	if b, _ := w.member.SchedulingV1().PriorityClasses().Get(w.ctx, "batch", metav1.GetOptions{}); b.Value != 5 {
		t.Errorf("the member's own class batch now has value %d", b.Value)
	}
	w.eventually("PriorityClassDiffers event", func() bool {
		e := w.events.find("job", wellknown.EventPriorityClassDiffers)
		return len(e) == 1 && strings.Contains(e[0].Message, "value 5, the host's has 100")
	})
	if _, err := w.member.SchedulingV1().PriorityClasses().Get(w.ctx, "system-cluster-critical", metav1.GetOptions{}); err == nil {
		t.Error("a built-in class was copied")
	}
}

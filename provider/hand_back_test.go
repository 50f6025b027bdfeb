// This file tests the hand-back of pods a member cannot schedule.

package provider

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube/kubetest"
	"flotilla.io/flotilla/internal/wellknown"
)

const insufficient = "0/2 nodes are available: 2 Insufficient cpu."

// stuck makes the member pod of a forwarded host pod unschedulable since
// ago, as the member's scheduler reports it.
func (w *harness) stuck(name string, ago time.Duration) {
	w.t.Helper()
	var m *corev1.Pod
	w.eventually("member pod "+name, func() bool {
		var err error
		m, err = w.memberPod(testNamespace, name)
		return err == nil
	})
	m = m.DeepCopy()
	m.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: insufficient, LastTransitionTime: metav1.NewTime(time.Now().Add(-ago))}}
	if _, err := w.member.CoreV1().Pods(testNamespace).UpdateStatus(w.ctx, m, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func ofReplicaSet(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Controller: ptr.To(true)}}
}

// TestHandBackAfterTheWait: a pod of a ReplicaSet the member cannot
// schedule is left alone for handBackAfter, then its member pod is
// deleted, and only then does the host pod fail, with the member's answer,
// for the ReplicaSet to replace.
func TestHandBackAfterTheWait(t *testing.T) {
	w := newHarness(t, func(c *harnessConfig) { c.handBackAfter = 300 * time.Millisecond })
	w.createHostPod(boundPod("web", ofReplicaSet))
	w.stuck("web", 0)
	w.never("handed back before the wait", 150*time.Millisecond, func() bool { return !w.memberPodExists(testNamespace, "web") })
	w.eventually("host pod failed as MemberUnschedulable", func() bool {
		p, err := w.getHostPod("web")
		if err != nil || p.Status.Phase != corev1.PodFailed {
			return false
		}
		if w.memberPodExists(testNamespace, "web") {
			t.Fatal("the host pod failed while its member pod still exists")
		}
		return p.Status.Reason == wellknown.ReasonMemberUnschedulable && strings.Contains(p.Status.Message, insufficient) &&
			strings.Contains(p.Status.Message, "cluster "+testNode)
	})
	w.eventually("HandedBack event", func() bool { return len(w.events.find("web", wellknown.EventHandedBack)) > 0 })
	w.never("forwarded again", 50*time.Millisecond, func() bool { return w.memberPodExists(testNamespace, "web") })
}

// TestBarePodIsNotHandedBack: a pod without a controller stays in the
// member, with one Event naming the member's answer.
func TestBarePodIsNotHandedBack(t *testing.T) {
	w := newHarness(t, func(c *harnessConfig) { c.handBackAfter = 30 * time.Second })
	w.createHostPod(boundPod("solo"))
	w.stuck("solo", time.Hour)
	w.eventually("MemberUnschedulable event", func() bool { return len(w.events.find("solo", wellknown.EventMemberUnschedulable)) > 0 })
	if !w.memberPodExists(testNamespace, "solo") || w.hostPhase("solo") == corev1.PodFailed {
		t.Fatal("a bare pod was handed back")
	}
	w.p.statusQueue.Add(testNamespace + "/solo")
	w.never("a second event for the same answer", 100*time.Millisecond, func() bool { return len(w.events.find("solo", wellknown.EventMemberUnschedulable)) > 1 })
}

// TestBoundMeanwhileIsNotHandedBack: a member pod that changed since it
// was read (the member bound it) is not deleted: the precondition fails,
// and the pod is looked at again.
func TestBoundMeanwhileIsNotHandedBack(t *testing.T) {
	w := newHarness(t, func(c *harnessConfig) { c.handBackAfter = time.Second })
	var conflicts atomic.Int32
	kubetest.PrependReactor(&w.member.Fake, "delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if d := a.(k8stesting.DeleteAction); d.GetDeleteOptions().Preconditions != nil && d.GetDeleteOptions().Preconditions.ResourceVersion != nil {
			conflicts.Add(1)
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, d.GetName(), errors.New("the resourceVersion in the precondition does not match"))
		}
		return false, nil, nil
	})
	w.createHostPod(boundPod("web", ofReplicaSet))
	w.stuck("web", time.Hour)
	w.eventually("a hand-back tried", func() bool { return conflicts.Load() > 0 })
	w.never("the host pod failed", 100*time.Millisecond, func() bool { return w.hostPhase("web") == corev1.PodFailed })
	if len(w.events.find("web", wellknown.EventHandedBack)) > 0 {
		t.Error("HandedBack reported for a pod that was not handed back")
	}
}

// TestPreemptingPodIsNotHandedBack: a pod the member's scheduler
// nominated a node for waits there, however long, while the
// lower-priority pods it preempted end.
func TestPreemptingPodIsNotHandedBack(t *testing.T) {
	w := newHarness(t, func(c *harnessConfig) { c.handBackAfter = 100 * time.Millisecond })
	w.createHostPod(boundPod("urgent", ofReplicaSet))
	var m *corev1.Pod
	w.eventually("member pod urgent", func() bool {
		var err error
		m, err = w.memberPod(testNamespace, "urgent")
		return err == nil
	})
	m = m.DeepCopy()
	m.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: insufficient, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}}
	m.Status.NominatedNodeName = "node-1"
	if _, err := w.member.CoreV1().Pods(testNamespace).UpdateStatus(w.ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.never("handed back while preempting", 400*time.Millisecond, func() bool { return !w.memberPodExists(testNamespace, "urgent") })
}

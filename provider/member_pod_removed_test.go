// This file tests what becomes of a host pod whose member pod someone
// other than flotilla evicted or deleted.

package provider

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube/kubetest"
	"flotilla.io/flotilla/internal/wellknown"
)

// evictInMember does what the member's eviction API does to a member
// pod: it marks the pod a disruption target, then deletes it.
func (w *harness) evictInMember(name string) {
	w.t.Helper()
	m, err := w.memberPod(testNamespace, name)
	must(w.t, err)
	m = m.DeepCopy()
	m.Status.Conditions = append(m.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: wellknown.ReasonEvictionByEvictionAPI, Message: "Eviction API: evicting"})
	_, err = w.member.CoreV1().Pods(testNamespace).UpdateStatus(w.ctx, m, metav1.UpdateOptions{})
	must(w.t, err)
	must(w.t, w.member.CoreV1().Pods(testNamespace).Delete(w.ctx, name, metav1.DeleteOptions{}))
}

// event returns the one event of reason on the host pod name.
func (w *harness) event(name, reason string) corev1.Event {
	w.t.Helper()
	var got []corev1.Event
	w.eventually(reason+" event", func() bool { got = w.events.find(name, reason); return len(got) > 0 })
	if len(got) != 1 {
		w.t.Errorf("%d %s events on %s, want 1", len(got), reason, name)
	}
	return got[0]
}

// goneKept counts what the provider keeps of member pods gone.
func (w *harness) goneKept() int {
	n := 0
	w.p.gone.Range(func(any, any) bool { n++; return true })
	return n
}

// TestMemberEvictionDeletesControlledHostPod: a drain in the member evicts
// the member pod of a ReplicaSet's pod; as an eviction in one cluster, the
// host pod goes, for the ReplicaSet to replace, and says where and why.
func TestMemberEvictionDeletesControlledHostPod(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web", ofReplicaSet))
	w.runMemberPod(testNamespace, "web")
	w.evictInMember("web")
	w.eventually("host pod deleted", func() bool { return w.hostPodGone("web") })
	e := w.event("web", wellknown.EventMemberPodEvicted)
	if e.Type != corev1.EventTypeNormal || !strings.Contains(e.Message, "evicted in member cluster "+testNode) || !strings.Contains(e.Message, "ReplicaSet") {
		t.Errorf("event %s %q: want Normal, saying the pod was evicted in %s and the ReplicaSet replaces it", e.Type, e.Message, testNode)
	}
	if got := w.events.find("web", wellknown.EventMemberPodDeleted); len(got) != 0 {
		t.Errorf("an eviction recorded as a deletion: %v", got[0].Message)
	}
	w.never("re-created in the member", 50*time.Millisecond, func() bool { return w.memberPodExists(testNamespace, "web") })
	if n := w.goneKept(); n != 0 {
		t.Errorf("%d gone member pods kept after the host pod went", n)
	}
}

// TestMemberDeletionDeletesControlledHostPod: a member pod of a
// ReplicaSet's pod deleted in the member takes its host pod with it, with a
// warning that it was not flotilla's doing.
func TestMemberDeletionDeletesControlledHostPod(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web", ofReplicaSet))
	w.runMemberPod(testNamespace, "web")
	must(t, w.member.CoreV1().Pods(testNamespace).Delete(w.ctx, "web", metav1.DeleteOptions{}))
	w.eventually("host pod deleted", func() bool { return w.hostPodGone("web") })
	e := w.event("web", wellknown.EventMemberPodDeleted)
	if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "deleted from member cluster "+testNode) {
		t.Errorf("event %s %q: want a Warning that the pod was deleted from %s", e.Type, e.Message, testNode)
	}
}

// TestMemberEvictionFailsBarePod: a bare pod has nothing to replace it, so
// an eviction in the member leaves it Failed with the reason, as a kubelet
// eviction does, rather than gone without a trace.
func TestMemberEvictionFailsBarePod(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	w.evictInMember("web")
	var p *corev1.Pod
	w.eventually("host pod failed", func() bool {
		var err error
		p, err = w.getHostPod("web")
		return err == nil && p.Status.Phase == corev1.PodFailed
	})
	if p.Status.Reason != wellknown.ReasonMemberPodDeleted || !strings.Contains(p.Status.Message, "evicted in member cluster "+testNode) {
		t.Errorf("status %s %q: want reason %s, saying the pod was evicted in %s", p.Status.Reason, p.Status.Message, wellknown.ReasonMemberPodDeleted, testNode)
	}
	disrupted := false
	for _, c := range p.Status.Conditions {
		disrupted = disrupted || (c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == wellknown.ReasonEvictionByEvictionAPI)
	}
	if !disrupted {
		t.Errorf("conditions %v: want DisruptionTarget True %s", p.Status.Conditions, wellknown.ReasonEvictionByEvictionAPI)
	}
	if e := w.event("web", wellknown.EventMemberPodEvicted); e.Type != corev1.EventTypeNormal {
		t.Errorf("event type %s, want Normal", e.Type)
	}
	if n := w.goneKept(); n != 0 {
		t.Errorf("%d gone member pods kept after the sync", n)
	}
}

// TestMemberEvictionFailsHostPodHeldByFinalizer: a Job's pod outlives its
// deletion until the Job controller has counted it (its tracking
// finalizer); it must end Failed, as a kubelet leaves a pod it stopped, or
// the Job would wait for it forever.
func TestMemberEvictionFailsHostPodHeldByFinalizer(t *testing.T) {
	w := newHarness(t)
	// The apiserver keeps a pod with finalizers, marked for deletion.
	kubetest.PrependReactor(&w.host.Fake, "delete", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		d := a.(ktesting.DeleteAction)
		obj, err := w.host.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), d.GetNamespace(), d.GetName())
		if err != nil || len(obj.(*corev1.Pod).Finalizers) == 0 {
			return false, nil, nil
		}
		p := obj.(*corev1.Pod).DeepCopy()
		if p.DeletionTimestamp == nil {
			now := metav1.Now()
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, ptr.To[int64](0)
			p.ResourceVersion = ""
		}
		return true, nil, w.host.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, p.Namespace)
	})
	w.createHostPod(boundPod("job", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "job", UID: "job", Controller: ptr.To(true)}}
		p.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	}))
	w.runMemberPod(testNamespace, "job")
	w.evictInMember("job")
	w.eventually("host pod Failed and being deleted", func() bool {
		p, err := w.getHostPod("job")
		return err == nil && p.DeletionTimestamp != nil && p.Status.Phase == corev1.PodFailed
	})
	w.event("job", wellknown.EventMemberPodEvicted)
}

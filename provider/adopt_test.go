// This file tests the adoption and release of member pods.

package provider

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// memberOwnPod is a running pod the member made itself (its ReplicaSet's).
func memberOwnPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: "member-uid-web", Labels: labels,
			Annotations: map[string]string{wellknown.AdoptableAnnotation: testNamespace + "/" + name}},
		Spec:   corev1.PodSpec{NodeName: "member-node-1", Containers: []corev1.Container{{Name: "c", Image: "img:1"}}},
		Status: runningStatus(),
	}
}

// TestAdoptRunningMemberPod: a host pod naming a member pod of its own
// (not flotilla's) takes it over: the member pod gets flotilla's identity
// and is neither replaced nor deleted, and the host pod shows it running.
func TestAdoptRunningMemberPod(t *testing.T) {
	member := memberOwnPod("web", map[string]string{"app": "web"})
	w := newHarness(t, func(c *harnessConfig) { c.memberObjects = []runtime.Object{member} })
	w.createHostPod(boundPod("web", func(p *corev1.Pod) {
		p.Annotations = map[string]string{wellknown.AdoptAnnotation: string(member.UID)}
	}))
	w.eventually("host pod running", func() bool { return w.hostPhase("web") == corev1.PodRunning })
	m, err := w.memberPod(testNamespace, "web")
	if err != nil || m.UID != member.UID {
		t.Fatalf("member pod replaced: %v %v", m, err)
	}
	owner := wellknown.Owner{Cluster: testNode, Installation: testInstallation}
	if !owner.Owns(m) || m.Labels[wellknown.HostUIDLabel] != "uid-web" || m.Labels["app"] != "web" {
		t.Errorf("adopted member pod labels %v", m.Labels)
	}
	if c, d := actions(w.member, "create", "pods"), actions(w.member, "delete", "pods"); c != 1 || d != 0 {
		// The one create is the attempt that found the pod there.
		t.Errorf("member pod created %d and deleted %d times, want one attempt and no deletion", c, d)
	}
	w.eventually("Adopted event", func() bool { return len(w.events.find("web", wellknown.EventAdopted)) > 0 })
}

// TestAdoptRefused: a host pod that does not name the member pod's UID, or
// names a pod of another flotilla installation, takes nothing over.
func TestAdoptRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		labels map[string]string
		uid    string
	}{
		"another pod's UID":                        {labels: map[string]string{"app": "web"}, uid: "some-other-uid"},
		"another installation's pod":               {labels: map[string]string{wellknown.InstallationLabel: "other", wellknown.ClusterLabel: testNode}, uid: "member-uid-web"},
		"a pod the member did not consent to give": {labels: map[string]string{"app": "web", "no-consent": "true"}, uid: "member-uid-web"},
	} {
		t.Run(name, func(t *testing.T) {
			member := memberOwnPod("web", tc.labels)
			if tc.labels["no-consent"] == "true" {
				member.Annotations = nil
			}
			w := newHarness(t, func(c *harnessConfig) { c.memberObjects = []runtime.Object{member} })
			w.createHostPod(boundPod("web", func(p *corev1.Pod) {
				p.Annotations = map[string]string{wellknown.AdoptAnnotation: tc.uid}
			}))
			w.never("member pod adopted", 100*time.Millisecond, func() bool {
				m, err := w.memberPod(testNamespace, "web")
				return err == nil && m.Labels[wellknown.HostUIDLabel] != ""
			})
			if m, err := w.memberPod(testNamespace, "web"); err != nil || m.Labels[wellknown.InstallationLabel] != tc.labels[wellknown.InstallationLabel] {
				t.Errorf("member pod after the refusal: %v, %v", m, err)
			}
		})
	}
}

// TestReleaseKeepsMemberPod: a host pod deleted with the release
// annotation leaves its member pod running, without flotilla's identity,
// and goes.
func TestReleaseKeepsMemberPod(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	before, _ := w.memberPod(testNamespace, "web")
	host, _ := w.getHostPod("web")
	host = host.DeepCopy()
	host.Annotations = map[string]string{wellknown.ReleaseAnnotation: "true"}
	host.DeletionTimestamp = ptr.To(metav1.Now())
	host.DeletionGracePeriodSeconds = ptr.To[int64](30)
	if _, err := w.host.CoreV1().Pods(testNamespace).Update(w.ctx, host, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("host pod gone", func() bool { return w.hostPodGone("web") })
	m, err := w.memberPod(testNamespace, "web")
	if err != nil || m.UID != before.UID || m.DeletionTimestamp != nil {
		t.Fatalf("member pod after release: %v, %v", m, err)
	}
	for _, k := range []string{wellknown.ManagedByLabel, wellknown.ClusterLabel, wellknown.InstallationLabel, wellknown.HostUIDLabel} {
		if _, ok := m.Labels[k]; ok {
			t.Errorf("released member pod still has label %s: %v", k, m.Labels)
		}
	}
	if m.Labels["app"] != "web" {
		t.Errorf("released member pod lost its own labels: %v", m.Labels)
	}
	if d := actions(w.member, "delete", "pods"); d != 0 {
		t.Errorf("member pod deleted %d times", d)
	}
	w.never("the released pod deleted as an orphan", 100*time.Millisecond, func() bool { return !w.memberPodExists(testNamespace, "web") })
}

// TestReleaseMarkOnTheMemberPod: a host pod removed at once reaches
// DeletePod as virtual-kubelet last saw it, perhaps without the mark; the
// mark on its member pod (which UpdatePod passed on) is enough.
func TestReleaseMarkOnTheMemberPod(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	m, _ := w.memberPod(testNamespace, "web")
	m = m.DeepCopy()
	m.Annotations[wellknown.ReleaseAnnotation] = "true"
	if _, err := w.member.CoreV1().Pods(testNamespace).Update(w.ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("the provider's cache shows the mark", func() bool {
		c, err := w.p.memberPods.Get(testNamespace, "web")
		return err == nil && c.Annotations[wellknown.ReleaseAnnotation] == "true"
	})
	if err := w.host.CoreV1().Pods(testNamespace).Delete(w.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("the member pod released", func() bool {
		c, err := w.memberPod(testNamespace, "web")
		return err == nil && c.Labels[wellknown.InstallationLabel] == ""
	})
	w.never("the released pod deleted", 100*time.Millisecond, func() bool { return !w.memberPodExists(testNamespace, "web") })
}

package provider

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube/kubetest"
	"flotilla.io/flotilla/internal/podfields"
	"flotilla.io/flotilla/internal/wellknown"
)

// emptyDirMode is the field of these tests: spec.volumes[].emptyDir.mode,
// which Kubernetes 1.37 added behind the EmptyDirVolumeMode gate (off by
// default); v1.34.4 does not know it.
const emptyDirMode = "spec.volumes[].emptyDir.mode"

func emptyDirModePod(name string, mods ...func(*corev1.Pod)) *corev1.Pod {
	return boundPod(name, append([]func(*corev1.Pod){func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Mode: ptr.To[int32](0o700)}}}}
	}}, mods...)...)
}

func ownedByReplicaSet(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-uid", Controller: ptr.To(true)}}
}

// dropOnCreate makes the member store pods without the emptyDir mode, as
// a v1.37 apiserver with EmptyDirVolumeMode off does (dropDisabledFields).
func dropOnCreate(w *harness) {
	kubetest.PrependReactor(&w.member.Fake, "create", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		pod := a.(ktesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].EmptyDir != nil {
				pod.Spec.Volumes[i].EmptyDir.Mode = nil
			}
		}
		pod.UID = "member-uid"
		if err := w.member.Tracker().Add(pod); err != nil {
			return true, nil, err
		}
		return true, pod, nil
	})
}

func withFields(f *podfields.Member) func(*harnessConfig) {
	return func(c *harnessConfig) { c.fields = f }
}

// waitsPending waits for the bare host pod name to stay Pending, not
// forwarded, with a message that names want.
func (w *harness) waitsPending(name, want string) {
	w.t.Helper()
	w.eventually(name+" Pending with "+want, func() bool {
		p, err := w.getHostPod(name)
		return err == nil && p.Status.Phase == corev1.PodPending && p.Status.Reason == wellknown.ReasonFieldNotSupported && strings.Contains(p.Status.Message, want)
	})
	w.eventually("FieldNotSupported event", func() bool {
		for _, e := range w.events.find(name, wellknown.EventFieldNotSupported) {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, want) {
				return true
			}
		}
		return false
	})
	w.never(name+" forwarded or failed", 100*time.Millisecond, func() bool {
		p, err := w.getHostPod(name)
		return w.memberPodExists(testNamespace, name) || err != nil || p.Status.Phase != corev1.PodPending
	})
}

// TestFieldDroppedByTheMember: a member that stores the pod without a field
// it was sent (its feature gate off) does not run it: the member pod is
// deleted, the field is kept as one that member drops, and the bare pod
// waits, Pending, saying so; it is not failed as a pod removed out of band.
func TestFieldDroppedByTheMember(t *testing.T) {
	fields := &podfields.Member{}
	fields.Served("v1.37.2", nil)
	w := buildHarness(t, withFields(fields))
	dropOnCreate(w)
	// The member pod is seen before it is deleted, and its deletion is
	// seen, and handled, before the delete call returns: as may happen
	// when the watch is quicker than the answer.
	kubetest.PrependReactor(&w.member.Fake, "delete", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		d := a.(ktesting.DeleteAction)
		_ = wait.PollUntilContextTimeout(w.ctx, 5*time.Millisecond, time.Second, true, func(context.Context) (bool, error) {
			_, seen := w.p.seen.Load(testNamespace + "/" + d.GetName())
			return seen, nil
		})
		if err := w.member.Tracker().Delete(d.GetResource(), d.GetNamespace(), d.GetName()); err != nil {
			return true, nil, err
		}
		_ = wait.PollUntilContextTimeout(w.ctx, 5*time.Millisecond, 300*time.Millisecond, true, func(context.Context) (bool, error) {
			return len(w.events.find(d.GetName(), wellknown.EventMemberPodDeleted)) > 0, nil
		})
		return true, nil, nil
	})
	w.start()
	w.createHostPod(emptyDirModePod("web"))
	w.waitsPending("web", emptyDirMode+" is dropped by Kubernetes v1.37.2 in cluster vn (its feature gate is off there)")
	if got := fields.Fields().Dropped; !slices.Equal(got, []string{emptyDirMode}) {
		t.Errorf("dropped fields = %v, want [%s]", got, emptyDirMode)
	}
	if len(w.events.find("web", wellknown.EventMemberPodDeleted)) > 0 {
		t.Error("the member pod flotilla deleted is reported as deleted out of band")
	}

	// A pod without the field runs there.
	w.createHostPod(boundPod("plain"))
	w.runMemberPod(testNamespace, "plain")
}

// TestFieldDroppedReplacedByItsController: a pod with a controller is
// deleted, so that its replacement is placed where the field runs.
func TestFieldDroppedReplacedByItsController(t *testing.T) {
	fields := &podfields.Member{}
	fields.Served("v1.37.2", nil)
	w := buildHarness(t, withFields(fields))
	dropOnCreate(w)
	w.start()
	w.createHostPod(emptyDirModePod("web-abc", ownedByReplicaSet))
	w.eventually("host pod deleted", func() bool { return w.hostPodGone("web-abc") })
	w.eventually("FieldNotSupported event naming the ReplicaSet", func() bool {
		for _, e := range w.events.find("web-abc", wellknown.EventFieldNotSupported) {
			if strings.Contains(e.Message, emptyDirMode+" is dropped by Kubernetes v1.37.2 in cluster vn") && strings.Contains(e.Message, "ReplicaSet") {
				return true
			}
		}
		return false
	})
	w.eventually("member pod deleted", func() bool { return !w.memberPodExists(testNamespace, "web-abc") })
}

// TestFieldUnknownToTheMember: a field the member's schema does not have
// is never sent; one its strict field validation refuses is learned.
func TestFieldUnknownToTheMember(t *testing.T) {
	fields := &podfields.Member{}
	fields.Served("v1.34.4", []string{emptyDirMode})
	w := buildHarness(t, withFields(fields))
	creates := 0
	kubetest.PrependReactor(&w.member.Fake, "create", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		creates++
		return false, nil, nil
	})
	w.start()
	w.createHostPod(emptyDirModePod("web"))
	w.waitsPending("web", emptyDirMode+" is not known to Kubernetes v1.34.4 in cluster vn")
	if creates != 0 {
		t.Errorf("%d member pods created for a pod the member's schema cannot hold", creates)
	}

	// Its schema not read yet, the member refuses the field itself.
	fields = &podfields.Member{}
	w = buildHarness(t, withFields(fields))
	kubetest.PrependReactor(&w.member.Fake, "create", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		if a.(ktesting.CreateAction).GetObject().(*corev1.Pod).Spec.Volumes == nil {
			return false, nil, nil
		}
		return true, nil, apierrors.NewBadRequest(`Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.volumes[0].emptyDir.mode"`)
	})
	w.start()
	w.createHostPod(emptyDirModePod("web"))
	w.waitsPending("web", emptyDirMode+" is not known to the Kubernetes version in cluster vn")
	if got := fields.Fields().Unknown; !slices.Equal(got, []string{emptyDirMode}) {
		t.Errorf("unknown fields = %v, want [%s]", got, emptyDirMode)
	}
}

// TestHostFieldFlotillaDoesNotKnow emulates flotilla-node's types older
// than the host: the v1.37.2 host's schema holds emptyDir.mode, which the
// types are made not to know. A pod that sets it is refused, naming it; a
// pod that does not is forwarded. (With flotilla's real types, which are
// the newest served release's, the host's schema holds nothing they do
// not know.)
func TestHostFieldFlotillaDoesNotKnow(t *testing.T) {
	b, err := os.ReadFile("../internal/podfields/testdata/pod-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	host, err := podfields.Served(b)
	if err != nil {
		t.Fatal(err)
	}
	known := podfields.Known()
	if got := podfields.Missing(host, known, "spec", "metadata"); len(got) != 0 {
		t.Fatalf("flotilla's types lack %v of the v1.37.2 host's pod fields", got)
	}
	delete(known, emptyDirMode)
	hostOnly := podfields.Missing(host, known, "spec", "metadata")
	if !slices.Equal(hostOnly, []string{emptyDirMode}) {
		t.Fatalf("host-only fields = %v, want [%s]", hostOnly, emptyDirMode)
	}
	w := newHarness(t, func(c *harnessConfig) { c.hostOnlyFields = hostOnly })
	w.createHostPod(emptyDirModePod("web"))
	w.waitsPending("web", emptyDirMode+" is not known to flotilla-node's Kubernetes types")
	w.createHostPod(boundPod("plain"))
	w.runMemberPod(testNamespace, "plain")
}

// TestMemberStatusFieldFlotillaDoesNotKnow emulates a member newer than
// flotilla-node's types: the v1.37.2 member's schema holds
// status.volumeHealth, which the types are made not to know. When the
// member sets it, the host pod is told once that it is not shown there.
// (With flotilla's real types, the newest served release's, no member's
// schema holds a status field they do not know.)
func TestMemberStatusFieldFlotillaDoesNotKnow(t *testing.T) {
	b, err := os.ReadFile("../internal/podfields/testdata/pod-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	member, err := podfields.Served(b)
	if err != nil {
		t.Fatal(err)
	}
	known := podfields.Known()
	if got := podfields.Missing(member, known, "status"); len(got) != 0 {
		t.Fatalf("flotilla's types lack %v of the v1.37.2 member's status fields", got)
	}
	delete(known, "status.volumeHealth")
	fields := &podfields.Member{}
	fields.Served("v1.37.2", nil)
	fields.ServesBeyond(podfields.Missing(member, known, "status"))
	w := newHarness(t, withFields(fields))
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	if n := len(w.events.find("web", wellknown.EventStatusFieldNotCarried)); n != 0 {
		t.Fatalf("%d StatusFieldNotCarried events before the member set the field", n)
	}
	m, err := w.memberPod(testNamespace, "web")
	if err != nil {
		t.Fatal(err)
	}
	m.Status.VolumeHealth = []corev1.PodVolumeHealth{{Name: "data"}}
	m.Status.PodIP = "10.0.0.8" // a change the host shows, for a sync
	if _, err := w.member.CoreV1().Pods(testNamespace).UpdateStatus(w.ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "cluster vn (v1.37.2) set status.volumeHealth, which flotilla-node's Kubernetes types do not know: it is not shown in the host"
	w.eventually("StatusFieldNotCarried event", func() bool {
		e := w.events.find("web", wellknown.EventStatusFieldNotCarried)
		return len(e) == 1 && e[0].Message == want && e[0].Type == corev1.EventTypeWarning
	})
}

// TestMemberStatusFieldAnOlderHostDoesNotKnow: a v1.34.4 host does not
// serve the pod-level status.resources a newer member reports (it came
// with 1.35); writing the status there would lose it, so the host pod is
// told, once.
func TestMemberStatusFieldAnOlderHostDoesNotKnow(t *testing.T) {
	b, err := os.ReadFile("../internal/podfields/testdata/pod-v1.34.4.json")
	if err != nil {
		t.Fatal(err)
	}
	host, err := podfields.Served(b)
	if err != nil {
		t.Fatal(err)
	}
	lacks := podfields.Missing(podfields.Known(), host, "status")
	if !slices.Contains(lacks, "status.resources") {
		t.Fatalf("a v1.34.4 host lacks %v, want status.resources among them", lacks)
	}
	w := newHarness(t, func(c *harnessConfig) { c.hostLacks, c.hostVersion = lacks, "v1.34.4" })
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	if n := len(w.events.find("web", wellknown.EventStatusFieldNotCarried)); n != 0 {
		t.Fatalf("%d StatusFieldNotCarried events before the member set the field", n)
	}
	m, err := w.memberPod(testNamespace, "web")
	if err != nil {
		t.Fatal(err)
	}
	m.Status.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	m.Status.PodIP = "10.0.0.8" // a change the host shows, for a sync
	if _, err := w.member.CoreV1().Pods(testNamespace).UpdateStatus(w.ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "cluster vn set status.resources, which the host's Kubernetes (v1.34.4) does not know: it is not shown in the host"
	w.eventually("StatusFieldNotCarried event", func() bool {
		e := w.events.find("web", wellknown.EventStatusFieldNotCarried)
		return len(e) == 1 && e[0].Message == want && e[0].Type == corev1.EventTypeWarning
	})
	// Another change: told once.
	m, err = w.memberPod(testNamespace, "web")
	if err != nil {
		t.Fatal(err)
	}
	m.Status.PodIP = "10.0.0.9"
	if _, err := w.member.CoreV1().Pods(testNamespace).UpdateStatus(w.ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("the new pod IP in the host", func() bool {
		p, err := w.host.CoreV1().Pods(testNamespace).Get(w.ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.PodIP == "10.0.0.9"
	})
	if n := len(w.events.find("web", wellknown.EventStatusFieldNotCarried)); n != 1 {
		t.Errorf("%d StatusFieldNotCarried events after two syncs, want 1", n)
	}
}

// This file tests forwarding pods through the provider under virtual-kubelet.

package provider

import (
	"context"
	"errors"
	"io"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube/kubetest"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/mirror"
	"flotilla.io/flotilla/provider/translate"
)

// runningStatus is the status a member kubelet reports for a started pod.
func runningStatus() corev1.PodStatus {
	now := metav1.Now()
	return corev1.PodStatus{
		Phase: corev1.PodRunning,
		PodIP: "10.0.0.7",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "c", Image: "img:1", Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
}

// runMemberPod makes the member pod of a forwarded host pod run, as the
// member's kubelet would, and waits for the host pod to show it.
func (w *harness) runMemberPod(namespace, name string) {
	w.t.Helper()
	var m *corev1.Pod
	w.eventually("member pod "+namespace+"/"+name, func() bool {
		var err error
		m, err = w.memberPod(namespace, name)
		return err == nil
	})
	m = m.DeepCopy()
	m.Status = runningStatus()
	if _, err := w.member.CoreV1().Pods(namespace).UpdateStatus(w.ctx, m, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.eventually("host pod "+name+" running", func() bool { return w.hostPhase(name) == corev1.PodRunning })
}

func TestCreateForwardsTranslatedPod(t *testing.T) {
	w := newHarness(t, func(c *harnessConfig) {
		c.mapper = Suffix(testNode)
		c.partition = &metav1.LabelSelector{MatchLabels: map[string]string{"location": "beijing"}}
	})
	w.createHostPod(boundPod("web", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{wellknown.ClusterLabel: testNode, "disk": "ssd"}
		p.Spec.Tolerations = []corev1.Toleration{
			{Key: wellknown.ProviderTaintKey, Operator: corev1.TolerationOpExists},
			{Key: "gpu", Operator: corev1.TolerationOpExists},
		}
	}))
	memberNS := testNamespace + "-" + testNode
	w.eventually("member pod", func() bool { return w.memberPodExists(memberNS, "web") })

	m, _ := w.memberPod(memberNS, "web")
	if d := cmp.Diff(map[string]string{"disk": "ssd", "location": "beijing"}, m.Spec.NodeSelector); d != "" {
		t.Errorf("member nodeSelector (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}, m.Spec.Tolerations); d != "" {
		t.Errorf("member tolerations (-want +got):\n%s", d)
	}
	if m.Spec.NodeName != "" || m.Labels[wellknown.HostUIDLabel] != "uid-web" || m.Labels["app"] != "web" ||
		m.Annotations[wellknown.HostNamespaceAnnotation] != testNamespace {
		t.Errorf("member pod identity: nodeName %q, labels %v, annotations %v", m.Spec.NodeName, m.Labels, m.Annotations)
	}
	ns, err := w.member.CoreV1().Namespaces().Get(w.ctx, memberNS, metav1.GetOptions{})
	if err != nil || ns.Labels[wellknown.ManagedByLabel] != wellknown.ManagedByValue {
		t.Errorf("member namespace %s: %v %v", memberNS, ns, err)
	}
}

func TestUpdateReachesMemberPod(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")

	host, _ := w.getHostPod("web")
	host = host.DeepCopy()
	host.Spec.Containers[0].Image = "img:2"
	host.Labels["tier"] = "front"
	if _, err := w.host.CoreV1().Pods(testNamespace).Update(w.ctx, host, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("member pod updated", func() bool {
		m, err := w.memberPod(testNamespace, "web")
		return err == nil && m.Spec.Containers[0].Image == "img:2" && m.Labels["tier"] == "front"
	})
	if n := actions(w.member, "create", "pods"); n != 1 {
		t.Errorf("member pod created %d times, want once", n)
	}
}

func TestDeleteHostPodDeletesMemberPod(t *testing.T) {
	t.Run("graceful", func(t *testing.T) {
		w := newHarness(t)
		w.createHostPod(boundPod("web"))
		w.runMemberPod(testNamespace, "web")
		w.markTerminating("web")
		w.eventually("member pod deleted", func() bool { return !w.memberPodExists(testNamespace, "web") })
		// Like a kubelet whose containers stopped, flotilla finishes the
		// deletion at once rather than after the grace period.
		w.eventually("host pod deleted", func() bool { return w.hostPodGone("web") })
	})
	// The apiserver bumps a pod's generation as its graceful deletion
	// starts. That alone is not written onto the host pod, which is about
	// to go: it comes with the member pod's next status, as a kubelet's
	// status of stopped containers brings it.
	t.Run("no status for the deletion alone", func(t *testing.T) {
		w := newHarness(t)
		w.createHostPod(boundPod("web", func(p *corev1.Pod) { p.Generation = 1 }))
		w.runMemberPod(testNamespace, "web")
		pods := corev1.SchemeGroupVersion.WithResource("pods")
		// The member pod terminates for its grace period, as a kubelet's does.
		kubetest.PrependReactor(&w.member.Fake, "delete", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
			d := a.(ktesting.DeleteAction)
			obj, err := w.member.Tracker().Get(pods, d.GetNamespace(), d.GetName())
			if err != nil {
				return true, nil, err
			}
			m := obj.(*corev1.Pod).DeepCopy()
			if m.DeletionTimestamp == nil {
				m.DeletionTimestamp, m.DeletionGracePeriodSeconds = ptr.To(metav1.Now()), ptr.To[int64](30)
				m.Generation++
			}
			return true, nil, w.member.Tracker().Update(pods, m, m.Namespace)
		})
		written := statusWrites(w.host)
		w.markTerminating("web")
		w.eventually("member pod terminating", func() bool {
			m, err := w.memberPod(testNamespace, "web")
			return err == nil && m.DeletionTimestamp != nil
		})
		w.never("a host status write for the deletion alone", 200*time.Millisecond, func() bool { return statusWrites(w.host) != written })
		// The member's containers stop: that is written, with the generation.
		m, _ := w.memberPod(testNamespace, "web")
		m = m.DeepCopy()
		m.Status.Conditions[0].Status = corev1.ConditionFalse
		if _, err := w.member.CoreV1().Pods(testNamespace).UpdateStatus(w.ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.eventually("the stopped containers on the host pod", func() bool {
			h, err := w.getHostPod("web")
			return err == nil && h.Status.ObservedGeneration == 2 && h.Status.Conditions[0].Status == corev1.ConditionFalse
		})
	})
	// A member under load shows the deletion late. Meanwhile
	// virtual-kubelet removes the host pod at the end of its grace period
	// and asks for the pod again, and the orphan check sees a member pod
	// without its host pod: neither deletes it a second time.
	t.Run("member slow to show the deletion", func(t *testing.T) {
		w := newHarness(t)
		w.createHostPod(boundPod("web"))
		w.runMemberPod(testNamespace, "web")
		kubetest.PrependReactor(&w.member.Fake, "delete", "pods", func(ktesting.Action) (bool, runtime.Object, error) {
			return true, nil, nil // accepted; the watch shows nothing yet
		})
		w.markTerminating("web")
		memberDeletes := func() int { return actions(w.member, "delete", "pods") }
		w.eventually("member pod deleted", func() bool { return memberDeletes() == 1 })
		// The end of the grace period, as virtual-kubelet ends it.
		if err := w.host.CoreV1().Pods(testNamespace).Delete(w.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		w.never("a second delete of the member pod", 300*time.Millisecond, func() bool { return memberDeletes() != 1 })
		// The member pod goes: nothing is kept about it.
		m, _ := w.memberPod(testNamespace, "web")
		if err := w.member.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), testNamespace, "web"); err != nil {
			t.Fatal(err)
		}
		w.eventually("the deletion forgotten", func() bool { _, asked := w.p.deleting.Load(m.UID); return !asked })
	})
	t.Run("force", func(t *testing.T) {
		w := newHarness(t)
		w.createHostPod(boundPod("web"))
		w.runMemberPod(testNamespace, "web")
		if err := w.host.CoreV1().Pods(testNamespace).Delete(w.ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.eventually("member pod deleted", func() bool { return !w.memberPodExists(testNamespace, "web") })
	})
}

// markTerminating does to a host pod what the apiserver does on kubectl
// delete: the pod stays, marked, with a grace period of 30 s and its
// generation bumped.
func (w *harness) markTerminating(name string) {
	w.t.Helper()
	host, err := w.getHostPod(name)
	if err != nil {
		w.t.Fatal(err)
	}
	host = host.DeepCopy()
	host.DeletionTimestamp = ptr.To(metav1.Now())
	host.DeletionGracePeriodSeconds = ptr.To[int64](30)
	if host.Generation > 0 {
		host.Generation++
	}
	if _, err := w.host.CoreV1().Pods(host.Namespace).Update(w.ctx, host, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// statusWrites counts the pod status writes made to c.
func statusWrites(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "pods" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func TestStatusBackSync(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	host, _ := w.getHostPod("web")
	if host.Status.PodIP != "10.0.0.7" || len(host.Status.ContainerStatuses) != 1 || host.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("host status does not show the member's: %+v", host.Status)
	}
}

func TestRestartAdoptsMemberPod(t *testing.T) {
	pod := boundPod("web")
	member := translate.ToMember(pod, translate.Target{Cluster: testNode, Namespace: testNamespace, Installation: testInstallation})
	member.UID = "member-uid"
	member.Status = runningStatus()
	w := newHarness(t, func(c *harnessConfig) {
		c.hostObjects = []runtime.Object{pod}
		c.memberObjects = []runtime.Object{member}
	})
	w.eventually("host pod running", func() bool { return w.hostPhase("web") == corev1.PodRunning })
	m, err := w.memberPod(testNamespace, "web")
	if err != nil || m.UID != "member-uid" {
		t.Fatalf("member pod replaced: %v %v", m, err)
	}
	if c, d := actions(w.member, "create", "pods"), actions(w.member, "delete", "pods"); c != 0 || d != 0 {
		t.Errorf("member pod created %d and deleted %d times, want neither", c, d)
	}
}

func TestMemberPodDeletedOutOfBand(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	if err := w.member.CoreV1().Pods(testNamespace).Delete(w.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("host pod failed", func() bool {
		p, err := w.getHostPod("web")
		return err == nil && p.Status.Phase == corev1.PodFailed && p.Status.Reason == wellknown.ReasonMemberPodDeleted
	})
	w.eventually("MemberPodDeleted event", func() bool { return len(w.events.find("web", wellknown.EventMemberPodDeleted)) > 0 })
	// A failed pod is its controller's to replace, not flotilla's to re-create.
	w.never("re-created in the member", 50*time.Millisecond, func() bool { return w.memberPodExists(testNamespace, "web") })
}

func secretVolumePod(name, secret string) *corev1.Pod {
	return boundPod(name, func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "db", MountPath: "/db"}}
	})
}

func TestMissingSecretHoldsPodUntilCreated(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(secretVolumePod("web", "db"))
	w.eventually("FailedMount event", func() bool { return len(w.events.find("web", wellknown.EventFailedMount)) > 0 })
	w.eventually("MandatorySecretNotFound event", func() bool {
		return len(w.events.find("web", wellknown.EventMandatorySecretNotFound)) > 0
	})
	w.eventually("host pod shows ContainerCreating", func() bool {
		p, err := w.getHostPod("web")
		return err == nil && p.Status.Phase == corev1.PodPending && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Waiting != nil && p.Status.ContainerStatuses[0].State.Waiting.Reason == wellknown.ReasonContainerCreating
	})
	if w.memberPodExists(testNamespace, "web") {
		t.Fatal("pod forwarded without its Secret")
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "db"}, Data: map[string][]byte{"pw": []byte("x")}}
	if _, err := w.host.CoreV1().Secrets(testNamespace).Create(w.ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("member pod", func() bool { return w.memberPodExists(testNamespace, "web") })
	s, err := w.member.CoreV1().Secrets(testNamespace).Get(w.ctx, "db", metav1.GetOptions{})
	if err != nil || string(s.Data["pw"]) != "x" {
		t.Fatalf("member Secret: %v %v", s, err)
	}
}

// fakeOverrides adds a label to every pod once pods is set, and fails with
// ErrOverridesNotSynced before; it passes objects through once objects is
// set.
type fakeOverrides struct{ pods, objects, broken atomic.Bool }

func (f *fakeOverrides) Pod(_ context.Context, host *corev1.Pod, _ string) (*corev1.Pod, []string, error) {
	if f.broken.Load() {
		return nil, nil, errors.New("overrider /spec/runtimeClassName does not fit the pod")
	}
	if !f.pods.Load() {
		return nil, nil, ErrOverridesNotSynced
	}
	out := host.DeepCopy()
	out.Labels = maps.Clone(out.Labels)
	out.Labels["overridden"] = "yes"
	return out, []string{testNamespace + "/label"}, nil
}

func (f *fakeOverrides) Object(obj runtime.Object, _, _ string) (runtime.Object, error) {
	if !f.objects.Load() {
		return nil, ErrOverridesNotSynced
	}
	return obj, nil
}

func TestOverridesNotSyncedYet(t *testing.T) {
	ovr := &fakeOverrides{}
	w := newHarness(t, func(c *harnessConfig) { c.overrides = ovr })
	w.createHostPod(boundPod("web"))
	w.eventually("ForwardRetrying event", func() bool { return len(w.events.find("web", wellknown.EventForwardRetrying)) > 0 })
	if w.memberPodExists(testNamespace, "web") {
		t.Fatal("pod forwarded before its override policies were read")
	}
	if n := len(w.events.find("web", wellknown.EventOverrideFailed)); n != 0 {
		t.Errorf("%d OverrideFailed events for policies not read yet", n)
	}
	ovr.pods.Store(true)
	ovr.objects.Store(true)
	w.eventually("member pod with the override", func() bool {
		m, err := w.memberPod(testNamespace, "web")
		return err == nil && m.Labels["overridden"] == "yes"
	})
	w.eventually("applied overrides recorded", func() bool {
		p, err := w.getHostPod("web")
		return err == nil && p.Annotations[wellknown.AppliedOverridesAnnotation] == testNamespace+"/label"
	})
}

// TestSecretOverridesNotSyncedYet: a Secret that exists in the host but
// cannot be read through the override policies yet is not missing. The pod
// is retried, not reported as waiting for a Secret that is there, which
// would hold it Pending for good: nothing would ever announce the Secret.
func TestSecretOverridesNotSyncedYet(t *testing.T) {
	ovr := &fakeOverrides{}
	ovr.pods.Store(true)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "db"}}
	w := newHarness(t, func(c *harnessConfig) {
		c.overrides = ovr
		c.hostObjects = []runtime.Object{secret}
	})
	w.createHostPod(secretVolumePod("web", "db"))
	w.eventually("ForwardRetrying event", func() bool { return len(w.events.find("web", wellknown.EventForwardRetrying)) > 0 })
	ovr.objects.Store(true)
	w.eventually("member pod", func() bool { return w.memberPodExists(testNamespace, "web") })
	if e := w.events.find("web", wellknown.EventFailedMount); len(e) != 0 {
		t.Errorf("Secret reported missing: %s", e[0].Message)
	}
}

// TestRetryThatCannotSucceedFailsPod: a pod whose forwarding was being
// retried and then failed for a reason retrying cannot fix becomes Failed,
// with the reason on the pod where kubectl shows it, instead of staying
// Pending with nothing but an event.
func TestRetryThatCannotSucceedFailsPod(t *testing.T) {
	ovr := &fakeOverrides{}
	w := newHarness(t, func(c *harnessConfig) { c.overrides = ovr })
	w.createHostPod(boundPod("web"))
	w.eventually("ForwardRetrying event", func() bool { return len(w.events.find("web", wellknown.EventForwardRetrying)) > 0 })
	ovr.broken.Store(true)
	w.eventually("host pod failed", func() bool {
		p, err := w.getHostPod("web")
		return err == nil && p.Status.Phase == corev1.PodFailed && p.Status.Reason == wellknown.ReasonForwardFailed &&
			strings.Contains(p.Status.Message, "does not fit the pod")
	})
	w.eventually("ForwardFailed event", func() bool { return len(w.events.find("web", wellknown.EventForwardFailed)) > 0 })
	if w.memberPodExists(testNamespace, "web") {
		t.Error("pod forwarded")
	}
}

// TestHeldPodIsNotCountedForwarded: a pod held for a missing Secret shows
// in the forwarding metrics as held, not as a successful create, until it
// is forwarded.
func TestHeldPodIsNotCountedForwarded(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newHarness(t, func(c *harnessConfig) { c.metrics = m })
	creates := func(result string) float64 {
		return testutil.ToFloat64(m.operations.WithLabelValues(testNode, "create", result))
	}
	w.createHostPod(secretVolumePod("web", "db"))
	w.eventually("pod held", func() bool { return creates("held") == 1 })
	if n := creates("success"); n != 0 {
		t.Errorf("%v successful creates of a pod held for its Secret", n)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "db"}}
	if _, err := w.host.CoreV1().Secrets(testNamespace).Create(w.ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("pod forwarded", func() bool { return creates("success") == 1 })
}

// TestMemberEventBeforeItsPodIsCached: a member event about a forwarded pod
// that the provider's caches do not show yet (the member's event and pod
// watches are not ordered) still reaches the host pod once they do.
func TestMemberEventBeforeItsPodIsCached(t *testing.T) {
	w := newHarness(t)
	// The member pod gets a UID known ahead, for the event to name it.
	const memberUID = "member-uid-web"
	kubetest.PrependReactor(&w.member.Fake, "create", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		if pod, ok := a.(ktesting.CreateAction).GetObject().(*corev1.Pod); ok && pod.Name == "web" {
			pod.UID = memberUID
		}
		return false, nil, nil
	})
	w.createHostPod(secretVolumePod("web", "db"))
	w.eventually("pod held", func() bool { return len(w.events.find("web", wellknown.EventMandatorySecretNotFound)) > 0 })
	now := metav1.Now()
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: testNamespace, Name: "web.1", UID: "event-1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: testNamespace, Name: "web", UID: memberUID},
		Reason:         "Scheduled", Message: "Successfully assigned app/web to node-1", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "default-scheduler"}, Count: 1, FirstTimestamp: now, LastTimestamp: now,
	}
	if _, err := w.member.CoreV1().Events(testNamespace).Create(w.ctx, event, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "db"}}
	if _, err := w.host.CoreV1().Secrets(testNamespace).Create(w.ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("member pod", func() bool { return w.memberPodExists(testNamespace, "web") })
	w.eventually("member event on the host pod", func() bool {
		e := w.mirroredEvents()
		m := e[mirror.HostEventName("web", event.UID)]
		return len(e) == 1 && m.InvolvedObject.Name == "web" && m.Reason == "Scheduled" && m.Message == event.Message
	})
}

// TestServicesFollowPods: a host Service whose selector matches a forwarded
// pod is mirrored into the member while the pod runs there, without what
// the member allocates itself, and removed with the pod.
func TestServicesFollowPods(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	w := newHarness(t, func(c *harnessConfig) { c.hostObjects = []runtime.Object{svc} })
	memberSvc := func() (*corev1.Service, error) {
		return w.member.CoreV1().Services(testNamespace).Get(w.ctx, "web", metav1.GetOptions{})
	}
	w.createHostPod(boundPod("other"))
	w.never("Service mirrored for a pod it does not select", 50*time.Millisecond, func() bool { _, err := memberSvc(); return err == nil })
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	w.eventually("member Service", func() bool { _, err := memberSvc(); return err == nil })
	s, _ := memberSvc()
	if s.Spec.ClusterIP != "" || s.Labels[wellknown.ManagedByLabel] != wellknown.ManagedByValue || s.Spec.Selector["app"] != "web" {
		t.Errorf("member Service: %+v", s)
	}
	if err := w.host.CoreV1().Pods(testNamespace).Delete(w.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("member Service removed", func() bool { _, err := memberSvc(); return err != nil })
}

// TestDependenciesFollowPods: the Secret and ConfigMap a pod uses are
// mirrored before it is forwarded, kept current, and deleted with its last
// user.
func TestDependenciesFollowPods(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "cfg"}, Data: map[string]string{"k": "1"}}
	w := newHarness(t, func(c *harnessConfig) { c.hostObjects = []runtime.Object{cm} })
	w.createHostPod(boundPod("web", func(p *corev1.Pod) {
		p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	}))
	memberCM := func() (*corev1.ConfigMap, error) {
		return w.member.CoreV1().ConfigMaps(testNamespace).Get(w.ctx, "cfg", metav1.GetOptions{})
	}
	w.runMemberPod(testNamespace, "web")
	if c, err := memberCM(); err != nil || c.Data["k"] != "1" {
		t.Fatalf("member ConfigMap: %v %v", c, err)
	}
	cm = cm.DeepCopy()
	cm.Data["k"] = "2"
	if _, err := w.host.CoreV1().ConfigMaps(testNamespace).Update(w.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("member ConfigMap updated", func() bool { c, err := memberCM(); return err == nil && c.Data["k"] == "2" })
	if err := w.host.CoreV1().Pods(testNamespace).Delete(w.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("member ConfigMap deleted", func() bool { _, err := memberCM(); return err != nil })
}

// TestKubeletReads: the kubelet API's pod list, pod status and logs come
// from the member pod, in host terms.
func TestKubeletReads(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	pods, err := w.p.GetPods(w.ctx)
	if err != nil || len(pods) != 1 || pods[0].Namespace != testNamespace || pods[0].Name != "web" || pods[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("GetPods: %v %v", pods, err)
	}
	if c := pods[0].Spec.Containers; len(c) != 1 || c[0].Name != "c" || c[0].Image != "img:1" {
		t.Errorf("GetPods shows the containers %v, want the pod's", c)
	}
	status, err := w.p.GetPodStatus(w.ctx, testNamespace, "web")
	if err != nil || status.PodIP != "10.0.0.7" {
		t.Errorf("GetPodStatus: %v %v", status, err)
	}
	if _, err := w.p.GetPodStatus(w.ctx, testNamespace, "nope"); err == nil {
		t.Error("GetPodStatus of a pod never forwarded succeeded")
	}
	logs, err := w.p.GetContainerLogs(w.ctx, testNamespace, "web", "c", api.ContainerLogOpts{Tail: 10, LimitBytes: 100, SinceSeconds: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	if b, _ := io.ReadAll(logs); len(b) == 0 {
		t.Error("no logs")
	}
}

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

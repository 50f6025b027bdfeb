// This file tests kubectl debug on forwarded pods: ephemeral containers
// reach the member pod and their status comes back.

package provider

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktesting "k8s.io/client-go/testing"

	"flotilla.io/flotilla/internal/kube/kubetest"
	"flotilla.io/flotilla/internal/wellknown"
)

// debugContainer is what kubectl debug -c dbg --image=busybox --target=c
// adds, with a mount of the host's service-account token volume.
func debugContainer() corev1.EphemeralContainer {
	return corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "dbg", Image: "busybox", Command: []string{"sleep", "3600"}, Stdin: true, TTY: true,
			Env:          []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "debug-token"}, Key: "t"}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
		},
		TargetContainerName: "c",
	}
}

// debug adds an ephemeral container to a host pod, as kubectl debug does.
func (w *harness) debug(name string, c corev1.EphemeralContainer) {
	w.t.Helper()
	host, err := w.getHostPod(name)
	if err != nil {
		w.t.Fatal(err)
	}
	host = host.DeepCopy()
	host.Spec.EphemeralContainers = append(host.Spec.EphemeralContainers, c)
	if _, err := w.host.CoreV1().Pods(testNamespace).UpdateEphemeralContainers(w.ctx, name, host, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func tokenVolume(p *corev1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}},
	}})
}

// TestDebugAddsEphemeralContainer: an ephemeral container added to a
// running host pod is added to its member pod through the
// ephemeralcontainers subresource, with its target and the Secret it reads
// mirrored, but without the host's token mount; the member's status of it
// comes back to the host pod.
func TestDebugAddsEphemeralContainer(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "debug-token"}, Data: map[string][]byte{"t": []byte("x")}}
	w := newHarness(t, func(c *harnessConfig) { c.hostObjects = []runtime.Object{secret} })
	w.createHostPod(boundPod("web", tokenVolume))
	w.runMemberPod(testNamespace, "web")

	w.debug("web", debugContainer())
	var m *corev1.Pod
	w.eventually("ephemeral container in the member pod", func() bool {
		var err error
		m, err = w.memberPod(testNamespace, "web")
		return err == nil && len(m.Spec.EphemeralContainers) == 1
	})
	got := m.Spec.EphemeralContainers[0]
	if got.Name != "dbg" || got.Image != "busybox" || got.TargetContainerName != "c" || !got.TTY || len(got.Env) != 1 {
		t.Errorf("member ephemeral container = %+v, want dbg as the host has it", got)
	}
	if len(got.VolumeMounts) != 0 {
		t.Errorf("member ephemeral container mounts %v, want none: the host's token volume is not the member's", got.VolumeMounts)
	}
	w.eventually("Secret the debugging container reads mirrored", func() bool {
		_, err := w.member.CoreV1().Secrets(testNamespace).Get(w.ctx, "debug-token", metav1.GetOptions{})
		return err == nil
	})
	if n := actions(w.member, "create", "pods"); n != 1 {
		t.Errorf("member pod created %d times, want once", n)
	}

	m = m.DeepCopy()
	m.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "dbg", Image: "busybox",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	if _, err := w.member.CoreV1().Pods(testNamespace).UpdateStatus(w.ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("host pod shows the ephemeral container running", func() bool {
		p, err := w.getHostPod("web")
		return err == nil && len(p.Status.EphemeralContainerStatuses) == 1 && p.Status.EphemeralContainerStatuses[0].State.Running != nil
	})

	// A second debugging session adds a second container, once.
	second := debugContainer()
	second.Name, second.Env = "dbg2", nil
	w.debug("web", second)
	w.eventually("second ephemeral container in the member pod", func() bool {
		m, err := w.memberPod(testNamespace, "web")
		return err == nil && len(m.Spec.EphemeralContainers) == 2 && m.Spec.EphemeralContainers[1].Name == "dbg2"
	})
}

// TestDebugRefusedByMember: a member that refuses ephemeral containers
// leaves an event with its message on the host pod, which keeps running.
func TestDebugRefusedByMember(t *testing.T) {
	w := newHarness(t)
	kubetest.PrependReactor(&w.member.Fake, "update", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "ephemeralcontainers" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "web", errNoDebugging)
	})
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	w.debug("web", debugContainer())
	w.eventually("EphemeralContainerRefused event with the member's message", func() bool {
		for _, e := range w.events.find("web", wellknown.EventEphemeralContainerRefused) {
			if strings.Contains(e.Message, errNoDebugging.Error()) && strings.Contains(e.Message, "dbg") {
				return true
			}
		}
		return false
	})
	if p := w.hostPhase("web"); p != corev1.PodRunning {
		t.Errorf("host pod phase %s after a refused debugging container, want Running", p)
	}
}

type refusal string

func (r refusal) Error() string { return string(r) }

const errNoDebugging = refusal("ephemeral containers are disabled by policy")

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"flotilla.io/flotilla/internal/kubeversion"
	"flotilla.io/flotilla/internal/wellknown"
)

// serverVersion is the GitVersion c's apiserver reports.
func serverVersion(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	v, err := c.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("read the server version: %v", err)
	}
	return v.GitVersion
}

// oldHost is the flotilla-node of TestUnsupportedHostVersion, and its
// virtual node's name.
const oldHost = "old-host"

// TestUnsupportedHostVersion runs a flotilla-node whose host is a real
// cluster of a Kubernetes version outside the host range: member shenzhen
// (Kubernetes 1.34) stands in as its host, the edge member is its member.
// Its virtual node, in shenzhen, says KubernetesVersionSupported=False
// with reason UnsupportedHostVersion and a message naming the version and
// the range, once, as a Warning Event on the node; it stays Ready, and a
// pod bound to it is forwarded and runs.
func TestUnsupportedHostVersion(t *testing.T) {
	host := env.World.Member("shenzhen")
	if host == nil {
		t.Fatal("no member shenzhen")
	}
	hostVersion := serverVersion(t, host.Client())
	if v := kubeversion.Check(kubeversion.Host, hostVersion); v.Supported || !v.Known {
		t.Fatalf("shenzhen runs %s, not a version outside the host range %s: the e2e world must keep a member this test can use as an unsupported host", hostVersion, kubeversion.Supported(kubeversion.Host))
	}
	memberVersion := serverVersion(t, env.World.Member(edgeMember).Client())
	p, err := env.StartInstanceIn(host, edgeMember, oldHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// Cordons and deletes the virtual node in shenzhen and what it
		// forwarded into the edge member.
		if out, err := env.RemoveMember(ctx, oldHost); err != nil {
			t.Logf("remove %s: %v\n%s", oldHost, err, out)
		}
	})
	c := host.Client()

	var verdict corev1.NodeCondition
	eventually(t, 2*time.Minute, "the virtual node in shenzhen says its host's version is unsupported, and is Ready", func(ctx context.Context) (bool, string, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, oldHost, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if ex, err := p.Exited(); ex {
			return false, "", fmt.Errorf("flotilla-node exited: %v\n%s", err, p.LogTail(30))
		}
		var ready, supported *corev1.NodeCondition
		for i := range n.Status.Conditions {
			switch c := &n.Status.Conditions[i]; c.Type {
			case corev1.NodeReady:
				ready = c
			case wellknown.NodeKubernetesVersionSupported:
				supported = c
			}
		}
		if ready == nil || supported == nil {
			return false, fmt.Sprintf("conditions %+v", n.Status.Conditions), nil
		}
		verdict = *supported
		return ready.Status == corev1.ConditionTrue && supported.Status == corev1.ConditionFalse &&
				n.Status.NodeInfo.KubeletVersion == memberVersion,
			fmt.Sprintf("Ready=%s, version %s, %+v", ready.Status, n.Status.NodeInfo.KubeletVersion, *supported), nil
	})
	if verdict.Reason != wellknown.ReasonUnsupportedHostVersion {
		t.Errorf("reason %s, want %s: only the host's version is outside its range", verdict.Reason, wellknown.ReasonUnsupportedHostVersion)
	}
	r := kubeversion.Supported(kubeversion.Host)
	for _, want := range []string{hostVersion, "oldest supported host version, " + r.Oldest.String(), r.String()} {
		if !strings.Contains(verdict.Message, want) {
			t.Errorf("message %q does not say %q", verdict.Message, want)
		}
	}

	var warnings []corev1.Event
	eventually(t, time.Minute, "a Warning Event on the virtual node", func(ctx context.Context) (bool, string, error) {
		l, err := c.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + oldHost + ",reason=" + wellknown.ReasonUnsupportedHostVersion})
		if err != nil {
			return false, "", err
		}
		warnings = l.Items
		return len(warnings) > 0, "", nil
	})
	if len(warnings) != 1 || warnings[0].Type != corev1.EventTypeWarning || warnings[0].Count > 1 || !strings.Contains(warnings[0].Message, hostVersion) {
		t.Errorf("events %+v, want one Warning naming %s", warnings, hostVersion)
	}

	// Forwarding goes on: a pod bound to the node runs in the edge member.
	ns := "old-host-" + fmt.Sprint(time.Now().UnixNano()%100000)
	if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{wellknown.ClusterLabel: oldHost},
			Tolerations:  []corev1.Toleration{virtualNodeToleration},
			Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
		},
	}
	// A new namespace's default ServiceAccount, which admission wants,
	// comes a moment after it.
	eventually(t, 30*time.Second, "the pod created", func(ctx context.Context) (bool, string, error) {
		_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	eventually(t, 2*time.Minute, "the pod runs through the virtual node of the unsupported host", func(ctx context.Context) (bool, string, error) {
		pod, err := c.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if !podReady(pod) {
			return false, fmt.Sprintf("phase %s on %q", pod.Status.Phase, pod.Spec.NodeName), nil
		}
		member, err := env.World.Member(edgeMember).Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return len(member.Items) == 1, fmt.Sprintf("%d pods in %s/%s", len(member.Items), edgeMember, ns), nil
	})
}

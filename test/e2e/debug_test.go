// This file tests kubectl debug against forwarded pods and virtual nodes,
// as a user runs it against the host.

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"flotilla.io/flotilla/test/streaming"
)

// debugMember runs TestKubectlDebug's pods. Its debugging container reads
// kwok's default log file of the member (testworld.KwokLogFile), which no
// other test writes on this member.
const debugMember = "shenzhen"

// TestKubectlDebug: kubectl debug adds a debugging container to a
// forwarded pod, which runs in the member pod and is seen running in the
// host, and whose logs and output reach kubectl through the virtual node;
// kubectl debug node/<virtual node> fails with the reason.
func TestKubectlDebug(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	t.Run("pod", func(t *testing.T) {
		pod := streamingPod(t, ns, "app", debugMember, nil)
		if _, err := kubectl(t.Context(), nil, "debug", "pod/app", "-n", ns, "-c", "dbg", "--image=busybox:1.36", "--", "sleep", "3600"); err != nil {
			t.Fatal(err)
		}
		var member *corev1.Pod
		eventually(t, 30*time.Second, "the member pod has the debugging container", func(ctx context.Context) (bool, string, error) {
			m, err := memberPodOf(ctx, pod)
			if err != nil || m == nil {
				return false, fmt.Sprint("no member pod: ", err), nil
			}
			member = m
			for _, c := range m.Spec.EphemeralContainers {
				if c.Name == "dbg" && c.Image == "busybox:1.36" && strings.Join(c.Command, " ") == "sleep 3600" {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("member ephemeral containers: %+v", m.Spec.EphemeralContainers), nil
		})
		// kwok starts no ephemeral container: the test reports it started,
		// as the member's kubelet would.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			m, err := memberClient(debugMember).CoreV1().Pods(member.Namespace).Get(t.Context(), member.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			m.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "dbg", Image: "busybox:1.36",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
			_, err = memberClient(debugMember).CoreV1().Pods(m.Namespace).UpdateStatus(t.Context(), m, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 15*time.Second, "the host pod shows the debugging container running", func(ctx context.Context) (bool, string, error) {
			p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, s := range p.Status.EphemeralContainerStatuses {
				if s.Name == "dbg" && s.State.Running != nil {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("ephemeral container statuses: %+v", p.Status.EphemeralContainerStatuses), nil
		})

		id := strconv.FormatInt(time.Now().UnixNano(), 36)
		if err := env.World.Member(debugMember).AppendKwokLog("dbg", false, time.Now(), "dbg line "+id); err != nil {
			t.Fatal(err)
		}
		out, err := kubectl(t.Context(), nil, "logs", "-n", ns, "app", "-c", "dbg")
		if err != nil || !strings.Contains(out, "dbg line "+id) {
			t.Errorf("kubectl logs -c dbg = %q, %v; want the line written in the member", out, err)
		}

		attached := streaming.Kubectl(t, env.World, "attach", "-n", ns, "app", "-c", "dbg")
		n := 0
		eventually(t, 30*time.Second, "output written after kubectl attach -c dbg started", func(context.Context) (bool, string, error) {
			if regexp.MustCompile(`dbg attached \d+ ` + id).MatchString(attached.String()) {
				return true, "", nil
			}
			n++
			if err := env.World.Member(debugMember).AppendKwokLog("dbg", false, time.Now(), fmt.Sprintf("dbg attached %d %s", n, id)); err != nil {
				return false, "", err
			}
			return false, attached.String(), nil
		})
	})
	t.Run("node", func(t *testing.T) {
		// flotilla-policy's webhook refuses the pod if an earlier test of
		// the run started it, flotilla-node fails it if not: either way
		// kubectl prints the same reason.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		started := time.Now()
		out, err := kubectl(ctx, nil, "debug", "node/"+debugMember, "-n", ns, "-it", "--image=busybox:1.36")
		if err == nil || !strings.Contains(err.Error(), "is a flotilla virtual node") || !strings.Contains(err.Error(), "kubeconfig") {
			t.Fatalf("kubectl debug node/%s = %q, %v; want it refused with the reason", debugMember, out, err)
		}
		t.Logf("kubectl debug node/%s refused in %s: %v", debugMember, time.Since(started).Round(time.Millisecond), err)
		pods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if !strings.HasPrefix(p.Name, "node-debugger-") {
				continue
			}
			if m, err := memberPodOf(t.Context(), p); err != nil || m != nil {
				t.Errorf("node debugging pod %s reached member %s (%v)", p.Name, debugMember, err)
			}
		}
	})
}

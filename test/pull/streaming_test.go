package pull_test

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

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/test/streaming"
)

// TestPullStreaming: the kubelet API's long-lived streams reach a pod of the
// member behind NAT through the tunnel as they reach a pod of a member in
// the host's network: kubectl logs -f sees a line written after it
// started, exec gets a TTY of the size asked for, attach sees the
// container's output, and port-forward round-trips bytes on two
// connections.
func TestPullStreaming(t *testing.T) {
	ns := namespace(t, "pull-streaming")
	pod := runOn(t, ns, "streams", far)
	member := env.World.Member(far)
	id := strconv.FormatInt(time.Now().UnixNano(), 36)

	t.Run("logs -f", func(t *testing.T) {
		out := streaming.Kubectl(t, env.World, "logs", "-n", ns, pod.Name, "-f", "--tail=1")
		n := 0
		// A line written before the stream reached the end of the file is
		// not new to it; keep writing until one comes through.
		poll(t, 30*time.Second, "a line written after kubectl logs -f started", func(context.Context) (bool, string) {
			if regexp.MustCompile(`follow \d+ ` + id).MatchString(out.String()) {
				return true, ""
			}
			n++
			if err := member.AppendKwokLog("app", false, time.Now(), fmt.Sprintf("follow %d %s", n, id)); err != nil {
				t.Fatal(err)
			}
			return false, out.String()
		})
	})

	t.Run("exec with a TTY", func(t *testing.T) {
		out, err := streaming.ExecTTY(t.Context(), env.World, ns, pod.Name, "app", 91, 27)
		if err != nil {
			t.Fatalf("exec with a TTY: %v (output %q)", err, out)
		}
		if got := out; !strings.Contains(got, "27 91") || !strings.Contains(got, "tty") {
			t.Errorf("exec with a 91x27 TTY printed %q, want the size 27 91 and tty", got)
		}
	})

	t.Run("attach", func(t *testing.T) {
		out := streaming.Kubectl(t, env.World, "attach", "-n", ns, pod.Name, "-c", "app")
		n := 0
		poll(t, 30*time.Second, "output written after kubectl attach started", func(context.Context) (bool, string) {
			if regexp.MustCompile(`attached \d+ ` + id).MatchString(out.String()) {
				return true, ""
			}
			n++
			if err := member.AppendKwokLog("app", false, time.Now(), fmt.Sprintf("attached %d %s", n, id)); err != nil {
				t.Fatal(err)
			}
			return false, out.String()
		})
	})

	t.Run("port-forward", func(t *testing.T) {
		local := streaming.PortForward(t, env.World, ns, pod.Name)
		streaming.EchoTwice(t, local, "the tunnel")
	})
}

// TestDeploymentOverPushAndPull: one Deployment spread evenly over the
// member the host reaches and the member behind NAT runs all its replicas,
// half in each member, and the logs of each replica come back from where
// it runs.
func TestDeploymentOverPushAndPull(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "push-and-pull")
	host := env.World.Host().Client()
	d := spreadDeployment("web", 4, near, far)
	d.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}}
	if _, err := host.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	poll(t, time.Minute, "4 replicas Ready, 2 in each member", func(ctx context.Context) (bool, string) {
		list, err := host.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		per := map[string]int{}
		ready := 0
		for _, p := range list.Items {
			per[p.Spec.NodeName]++
			if podstate.Ready(&p) {
				ready++
			}
		}
		pods = list.Items
		return ready == 4 && per[near] == 2 && per[far] == 2, fmt.Sprintf("%d Ready, per node %v", ready, per)
	})
	// The Deployment controller counts the Ready pods after they turn
	// Ready; what the user sees in `kubectl get deploy` follows shortly.
	poll(t, 30*time.Second, "the Deployment reports 4 replicas available", func(ctx context.Context) (bool, string) {
		got, err := host.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.AvailableReplicas == 4, fmt.Sprintf("%d available", got.Status.AvailableReplicas)
	})
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, member := range []string{near, far} {
		if err := env.World.Member(member).AppendKwokLog("app", false, time.Now(), "served from "+member+" "+id); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		// Every replica's member pod is really in that member.
		mp, err := env.World.Member(p.Spec.NodeName).Client().CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || !podstate.Ready(mp) {
			t.Errorf("member pod of %s in %s: %v", p.Name, p.Spec.NodeName, err)
		}
		out, err := kubectl(ctx, nil, "logs", "-n", ns, p.Name, "--tail=1")
		if want := "served from " + p.Spec.NodeName + " " + id + "\n"; err != nil || out != want {
			t.Errorf("kubectl logs %s (in %s) = %q, %v; want %q", p.Name, p.Spec.NodeName, out, err, want)
		}
	}
}

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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/streaming"
	"flotilla.io/flotilla/test/testworld"
)

// TestKubeletAPIOnEveryVersion uses logs, exec, attach, port-forward and top
// through the host on a pod in each member, each of which runs another
// Kubernetes minor than the host. The pods' container is named so that kwok
// serves it its members' default log file, which no other test reads whole.
func TestKubeletAPIOnEveryVersion(t *testing.T) {
	// Usage takes most of a minute to reach kubectl top: the metrics-servers
	// start first and are read last.
	clusters := append([]string{testworld.HostName}, members...)
	if err := env.World.StartMetricsServers(t.Context(), clusters...); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	usage := map[string]string{"kwok.x-k8s.io/usage-cpu": "150m", "kwok.x-k8s.io/usage-memory": "30Mi"}
	pods := map[string]*corev1.Pod{}
	for _, member := range members {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "kubelet-api-" + member, Namespace: ns, Annotations: usage},
			Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{wellknown.ClusterLabel: member},
				Tolerations:                   []corev1.Toleration{virtualNodeToleration},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers:                    []corev1.Container{{Name: "main", Image: "busybox:1.36"}},
			},
		}
		if _, err := hostClient().CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod: %v", err)
		}
	}
	for _, member := range members {
		pods[member] = waitPodReady(t, ns, "kubelet-api-"+member)
	}

	for _, member := range members {
		pod := pods[member]
		version := env.World.Member(member).KubernetesVersion()
		t.Run(member+" "+version, func(t *testing.T) {
			m := env.World.Member(member)
			id := strconv.FormatInt(time.Now().UnixNano(), 36)
			t.Run("logs", func(t *testing.T) {
				line := "versions " + member + " " + id
				if err := m.AppendKwokLog("main", false, time.Now(), line); err != nil {
					t.Fatal(err)
				}
				out, err := kubectl(t.Context(), nil, "logs", "-n", ns, pod.Name, "--tail=1")
				if err != nil {
					t.Fatal(err)
				}
				if out != line+"\n" {
					t.Errorf("kubectl logs --tail=1 = %q, want %q", out, line+"\n")
				}
			})
			t.Run("exec", func(t *testing.T) {
				out, err := kubectl(t.Context(), strings.NewReader(id+"\n"), "exec", "-i", "-n", ns, pod.Name, "--", "head", "-n", "1")
				if err != nil {
					t.Fatal(err)
				}
				if out != id+"\n" {
					t.Errorf("kubectl exec -i head -n 1 = %q, want %q", out, id+"\n")
				}
			})
			t.Run("attach", func(t *testing.T) {
				out := streaming.Kubectl(t, env.World, "attach", "-n", ns, pod.Name)
				n := 0
				eventually(t, 30*time.Second, "output written after kubectl attach started", func(context.Context) (bool, string, error) {
					if regexp.MustCompile(`attached \d+ ` + id).MatchString(out.String()) {
						return true, "", nil
					}
					n++
					return false, out.String(), m.AppendKwokLog("main", false, time.Now(), fmt.Sprintf("attached %d %s", n, id))
				})
			})
			// One at a time: kwok forwards every pod port to one listener.
			t.Run("port-forward", func(t *testing.T) {
				local := streaming.PortForward(t, env.World, ns, pod.Name)
				streaming.EchoTwice(t, local, member+" "+version)
			})
		})
	}

	for _, member := range members {
		pod := pods[member]
		t.Run("top "+member, func(t *testing.T) {
			eventually(t, 3*time.Minute, "kubectl top pod to show the usage kwok simulates in "+member, func(ctx context.Context) (bool, string, error) {
				ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				out, err := kubectl(ctx, nil, "top", "pod", "-n", ns, pod.Name, "--no-headers", "--request-timeout=10s")
				if err != nil {
					return false, err.Error(), nil
				}
				f := strings.Fields(out) // NAME CPU MEMORY
				if len(f) != 3 || f[0] != pod.Name {
					return false, out, nil
				}
				cpu, cerr := resource.ParseQuantity(f[1])
				mem, merr := resource.ParseQuantity(f[2])
				if cerr != nil || merr != nil || cpu.MilliValue() < 100 || cpu.MilliValue() > 200 || mem.Cmp(resource.MustParse("30Mi")) != 0 {
					return false, out, nil
				}
				return true, "", nil
			})
		})
	}
}

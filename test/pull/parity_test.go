package pull_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/testworld"
)

// TestPullParity: what push mode does, pull mode does, with flotilla-node
// inside the member behind NAT. One installation splits the member into
// two label partitions (virtual nodes far-a and far-b) and runs as an
// active/standby pair there. A Deployment spread over both partitions
// runs, its ConfigMap and Secret mirrored into each partition's member
// namespace and an override policy changing its image in far-b only. The
// active process is killed and the standby takes over without replacing a
// pod, and forwards new ones. Finally --remove takes the installation out:
// its virtual nodes, member pods and mirrored objects are gone.
func TestPullParity(t *testing.T) {
	ctx := t.Context()
	const instance = "far-parts"
	host, member := env.World.Host().Client(), env.World.Member(far)
	mc := member.Client()

	if err := member.AddNode(ctx, testworld.NodeSpec{Name: "far-node-b", Labels: map[string]string{"location": "b"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = member.RemoveNode(context.Background(), "far-node-b") })
	ports := make([]int, 2)
	for i := range ports {
		p, err := env.World.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	cfg := filepath.Join(t.TempDir(), "parts.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `apiVersion: flotilla.io/v1alpha1
kind: NodeConfig
virtualClusters:
- name: far-a
  nodeSelector: {matchExpressions: [{key: location, operator: NotIn, values: [b]}]}
  kubeletPort: %d
- name: far-b
  nodeSelector: {matchLabels: {location: b}}
  kubeletPort: %d
`, ports[0], ports[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config=" + cfg, "--leader-elect", "--leader-election-namespace=default", "--leader-elect-lease-duration=4s"}
	var pair []*testworld.Process
	for range 2 {
		p, err := env.StartInstance(far, instance, args...)
		if err != nil {
			t.Fatal(err)
		}
		pair = append(pair, p)
	}
	t.Cleanup(func() {
		for _, p := range pair {
			_ = p.Stop()
		}
		for _, n := range []string{"far-a", "far-b"} {
			_ = host.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	for _, n := range []string{"far-a", "far-b"} {
		if err := env.WaitVirtualNodeReady(ctx, instance, n, time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	ns := namespace(t, "pull-parity")
	if _, err := host.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config"},
		Data: map[string]string{"mode": "on"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := host.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-secret"},
		StringData: map[string]string{"password": "far away"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(ctx, strings.NewReader(`apiVersion: policy.flotilla.io/v1alpha1
kind: OverridePolicy
metadata:
  name: far-b-canary
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  overrideRules:
  - targetCluster:
      clusterNames: [far-b]
    overriders:
      imageOverrider:
      - component: Tag
        operator: replace
        value: "1.28"
`), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d := spreadDeployment("web", 2, "far-a", "far-b")
	spec := &d.Spec.Template.Spec
	spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "secret", MountPath: "/etc/secret"}}
	spec.Volumes = []corev1.Volume{{Name: "secret", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "web-secret"}}}}
	if _, err := host.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	split := func(want map[string]int) map[types.UID]string {
		t.Helper()
		uids := map[types.UID]string{}
		poll(t, 2*time.Minute, fmt.Sprintf("web split %v, all Ready", want), func(ctx context.Context) (bool, string) {
			list, err := host.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, err.Error()
			}
			got, all := map[string]int{}, 0
			clear(uids)
			for i := range list.Items {
				p := &list.Items[i]
				if p.DeletionTimestamp != nil {
					continue
				}
				all++
				if podstate.Ready(p) {
					got[p.Spec.NodeName]++
					uids[p.UID] = p.Name
				}
			}
			total := 0
			for _, n := range want {
				total += n
			}
			return maps.Equal(got, want) && all == total, fmt.Sprintf("%v (%d pods)", got, all)
		})
		return uids
	}
	before := split(map[string]int{"far-a": 1, "far-b": 1})

	// Each partition's member namespace holds its pod and what it uses;
	// far-b's pod runs the overridden image.
	own := func(node string) metav1.ListOptions {
		return metav1.ListOptions{LabelSelector: wellknown.ClusterLabel + "=" + node}
	}
	for node, image := range map[string]string{"far-a": "nginx:1.27", "far-b": "nginx:1.28"} {
		memberNS := ns + "-" + node
		poll(t, time.Minute, "the member holds "+node+"'s pod, ConfigMap and Secret", func(ctx context.Context) (bool, string) {
			pods, err1 := mc.CoreV1().Pods(memberNS).List(ctx, own(node))
			cm, err2 := mc.CoreV1().ConfigMaps(memberNS).Get(ctx, "web-config", metav1.GetOptions{})
			s, err3 := mc.CoreV1().Secrets(memberNS).Get(ctx, "web-secret", metav1.GetOptions{})
			if err1 != nil || err2 != nil || err3 != nil {
				return false, fmt.Sprint(err1, err2, err3)
			}
			if len(pods.Items) != 1 || pods.Items[0].Spec.Containers[0].Image != image {
				return false, fmt.Sprintf("%d pods (%v)", len(pods.Items), pods.Items)
			}
			return cm.Data["mode"] == "on" && string(s.Data["password"]) == "far away", fmt.Sprintf("ConfigMap %v, Secret %q", cm.Data, s.Data["password"])
		})
	}

	// The active process dies; the standby takes over.
	var active, standby *testworld.Process
	poll(t, time.Minute, "one flotilla-node active", func(context.Context) (bool, string) {
		for i, p := range pair {
			if strings.Contains(p.LogTail(300), "active: holding the leader Lease") {
				active, standby = p, pair[1-i]
				return true, ""
			}
		}
		return false, ""
	})
	select {
	case <-standby.Done():
		t.Fatalf("the standby exited before the takeover:\n%s", standby.LogTail(20))
	default:
	}
	if err := syscall.Kill(active.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-active.Done()
	poll(t, time.Minute, "the standby takes over", func(context.Context) (bool, string) {
		return strings.Contains(standby.LogTail(300), "active: holding the leader Lease"), ""
	})
	if _, err := host.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	after := split(map[string]int{"far-a": 2, "far-b": 2})
	for uid, name := range before {
		if _, ok := after[uid]; !ok {
			t.Errorf("pod %s (%s) was replaced across the takeover", name, uid)
		}
	}
	for _, p := range []string{"far-a", "far-b"} {
		line := "through " + p + " " + strconv.FormatInt(time.Now().UnixNano(), 36)
		list, err := host.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "spec.nodeName=" + p})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("pods on %s: %v", p, err)
		}
		if out, err := kubectl(ctx, strings.NewReader(line+"\n"), "exec", "-i", "-n", ns, list.Items[0].Name, "--", "head", "-n", "1"); err != nil || out != line+"\n" {
			t.Errorf("exec into a pod on %s after the takeover: %q, %v", p, out, err)
		}
	}

	// --remove, with the pair stopped.
	for _, p := range pair {
		_ = p.Stop()
	}
	if out, err := env.RemoveMember(ctx, instance); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, node := range []string{"far-a", "far-b"} {
		if _, err := host.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("virtual node %s after --remove: %v", node, err)
		}
		memberNS := ns + "-" + node
		poll(t, time.Minute, "nothing of "+node+" left in the member", func(ctx context.Context) (bool, string) {
			pods, err1 := mc.CoreV1().Pods(memberNS).List(ctx, own(node))
			_, err2 := mc.CoreV1().ConfigMaps(memberNS).Get(ctx, "web-config", metav1.GetOptions{})
			_, err3 := mc.CoreV1().Secrets(memberNS).Get(ctx, "web-secret", metav1.GetOptions{})
			if err1 != nil {
				return false, err1.Error()
			}
			return len(pods.Items) == 0 && apierrors.IsNotFound(err2) && apierrors.IsNotFound(err3),
				fmt.Sprintf("%d pods, ConfigMap %v, Secret %v", len(pods.Items), err2, err3)
		})
	}
	if err := host.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

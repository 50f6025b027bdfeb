package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/kubeversion"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/plugin"
)

// TestKubectlFlotillaClusters runs `kubectl flotilla clusters` as a user
// would, the plugin found by kubectl on PATH: every member flotilla-node
// runs for has its row, with its member name, push mode, Ready, the
// member's own Kubernetes version (the world mixes them) and whether
// flotilla supports it with the host's, its node count, a fresh heartbeat,
// a kubelet endpoint the host apiserver reaches, and the pods bound to it
// counted with what they request.
func TestKubectlFlotillaClusters(t *testing.T) {
	ns := namespace(t)
	const member = "hangzhou"
	d := deployment(ns, "web", 2)
	d.Spec.Template.Spec.NodeSelector = map[string]string{wellknown.ClusterLabel: member}
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	create(t, hostClient().AppsV1().Deployments(ns).Create, d)
	waitSplit(t, ns, "web", map[string]int{member: 2})

	var rows []plugin.Cluster
	eventually(t, time.Minute, "kubectl flotilla clusters shows every member Ready, its kubelet endpoint reached", func(ctx context.Context) (bool, string, error) {
		out, err := env.KubectlFlotilla(ctx, "clusters", "-o", "json")
		if err != nil {
			return false, "", err
		}
		var list struct{ Clusters []plugin.Cluster }
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return false, "", fmt.Errorf("%w: %s", err, out)
		}
		rows = list.Clusters
		byName := map[string]plugin.Cluster{}
		for _, r := range rows {
			byName[r.Name] = r
		}
		for _, m := range members {
			r, ok := byName[m]
			if !ok || r.Ready != corev1.ConditionTrue || r.KubeletAPI != "Reachable" {
				return false, out, nil
			}
		}
		return true, "", nil
	})
	hostVersion := serverVersion(t, hostClient())
	hostSupported := kubeversion.Check(kubeversion.Host, hostVersion).Supported
	for _, r := range rows {
		isMember := false
		for _, m := range members {
			isMember = isMember || r.Name == m
		}
		if !isMember {
			continue
		}
		nodes, err := env.World.Member(r.Name).Client().CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		version := serverVersion(t, memberClient(r.Name))
		if r.Member != r.Name || r.Mode != "push" || r.KubernetesVersion != version || r.Nodes != len(nodes.Items) {
			t.Errorf("%s: member %q mode %q version %q nodes %d, want %s, push, %s, %d", r.Name, r.Member, r.Mode, r.KubernetesVersion, r.Nodes, r.Name, version, len(nodes.Items))
		}
		want := corev1.ConditionFalse
		if hostSupported && kubeversion.Check(kubeversion.Member, version).Supported {
			want = corev1.ConditionTrue
		}
		if r.VersionSupported != want {
			t.Errorf("%s: member %s, host %s: supported %q (%s), want %s", r.Name, version, hostVersion, r.VersionSupported, r.VersionMessage, want)
		}
		if r.Heartbeat == nil || time.Since(r.Heartbeat.Time) > time.Minute {
			t.Errorf("%s: heartbeat %v, want within the lease's renewal", r.Name, r.Heartbeat)
		}
		if r.Name != member {
			continue
		}
		// Other tests may place pods there too: at least ours.
		cpu := r.Requested[corev1.ResourceCPU]
		if r.Pods < 2 || cpu.Cmp(resource.MustParse("200m")) < 0 {
			t.Errorf("%s: %d pods requesting %s cpu, want at least the test's 2 pods and 200m", r.Name, r.Pods, cpu.String())
		}
	}

	out, err := env.KubectlFlotilla(t.Context(), "clusters")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 1+len(members) || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "SUPPORTED") || !strings.Contains(lines[0], "BACKLOG") {
		t.Errorf("kubectl flotilla clusters printed:\n%s", out)
	}
	t.Logf("kubectl flotilla clusters:\n%s", out)
	if _, err := env.KubectlFlotilla(t.Context(), "clusters", "-o", "xml"); err == nil || !strings.Contains(err.Error(), "want wide, json or yaml") {
		t.Errorf("-o xml: %v, want a refusal naming the formats", err)
	}
}

// TestKubectlFlotillaExplain: `kubectl flotilla explain` says in its first
// line why each pod is where it is, or why it is not running: a pod
// running in a member (naming the member node its scheduler chose), one no
// cluster can take (pending in the host), one its member cannot schedule
// (pending in the member), and one held back because a Secret it mounts is
// missing; and, for a Deployment, the same for its pods, grouped.
func TestKubectlFlotillaExplain(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	hc := hostClient().CoreV1()

	running := create(t, hc.Pods(ns).Create, barePod(ns, "running", "beijing"))
	waitPodReady(t, ns, running.Name)

	huge := barePod(ns, "too-big", "beijing")
	huge.Spec.NodeSelector = nil
	huge.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}
	create(t, hc.Pods(ns).Create, huge)

	// Bound to hangzhou directly: the host takes it (its virtual node sums
	// 64 cpu), the member cannot (no node has 40 free).
	member := barePod(ns, "member-full", "hangzhou")
	member.Spec.NodeSelector = nil
	member.Spec.NodeName = "hangzhou"
	member.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("40")}
	create(t, hc.Pods(ns).Create, member)

	secret := barePod(ns, "no-secret", "beijing")
	secret.Spec.Volumes = []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-password"}}}}
	secret.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "db", MountPath: "/db"}}
	create(t, hc.Pods(ns).Create, secret)

	for pod, want := range map[string]string{
		"running":     ns + "/running: Running in cluster beijing on member node beijing-node-",
		"too-big":     ns + "/too-big: Pending in the host",
		"member-full": ns + "/member-full: Pending in cluster hangzhou, its scheduler cannot place it: 0/2 nodes are available",
		"no-secret":   ns + `/no-secret: Held back by flotilla, not forwarded to cluster beijing: Mandatory secret "db-password" not found`,
	} {
		var out string
		eventually(t, time.Minute, "kubectl flotilla explain pod/"+pod+" to say "+want, func(ctx context.Context) (bool, string, error) {
			var err error
			out, err = env.KubectlFlotilla(ctx, "explain", "pod/"+pod, "-n", ns)
			if err != nil {
				return false, err.Error(), nil
			}
			first, _, _ := strings.Cut(out, "\n")
			return strings.HasPrefix(first, want), out, nil
		})
		t.Logf("kubectl flotilla explain pod/%s:\n%s", pod, out)
	}

	d := deployment(ns, "web", 2)
	d.Spec.Template.Spec.NodeSelector = map[string]string{wellknown.ClusterLabel: "hangzhou"}
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	create(t, hostClient().AppsV1().Deployments(ns).Create, d)
	waitSplit(t, ns, "web", map[string]int{"hangzhou": 2})
	out, err := env.KubectlFlotilla(ctx, "explain", "deployment/web", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(out, "\n"); first != "2 of 2 pods: Running in cluster hangzhou, Ready" {
		t.Errorf("kubectl flotilla explain deployment/web:\n%s", out)
	}
	if _, err := env.KubectlFlotilla(ctx, "explain", "pod/nothing-here", "-n", ns); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("explain of a pod that does not exist: %v", err)
	}
}

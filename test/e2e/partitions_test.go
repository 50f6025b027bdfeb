package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// edgeMember is a member whose nodes sit in two bank branches; the
// partition test splits it into one virtual cluster per branch.
const edgeMember = "kubeedge"

// edgeNodes are edgeMember's kwok nodes: three per branch.
func edgeNodes() []nodeSpecLite {
	var out []nodeSpecLite
	for _, loc := range []string{"beijing", "hangzhou"} {
		for i := 1; i <= 3; i++ {
			out = append(out, nodeSpecLite{name: fmt.Sprintf("%s-edge-%d", loc, i), labels: map[string]string{"location": loc}})
		}
	}
	return out
}

type nodeSpecLite struct {
	name   string
	labels map[string]string
}

// partitionConfig splits edgeMember by location; the kubelet ports come
// from the test world so they cannot clash with anything it runs.
const partitionConfig = `apiVersion: flotilla.io/v1alpha1
kind: NodeConfig
virtualClusters:
- name: ke-beijing-cluster
  nodeSelector: {matchLabels: {location: beijing}}
  taints: [{key: flotilla.io/edge, value: "true", effect: NoSchedule}]
  kubeletPort: %d
- name: ke-hangzhou-cluster
  nodeSelector: {matchLabels: {location: hangzhou}}
  taints: [{key: flotilla.io/edge, value: "true", effect: NoSchedule}]
  kubeletPort: %d
`

var partitions = []string{"ke-beijing-cluster", "ke-hangzhou-cluster"}

// TestVirtualClusters reproduces the KubeEdge scenario: one member split by
// node label into two virtual clusters, one Deployment and Service in host
// namespace edge, each branch getting its own namespace, pods confined to
// its nodes and its own copy of the Service.
func TestVirtualClusters(t *testing.T) {
	hc, mc := hostClient(), memberClient(edgeMember)
	cfgPath := filepath.Join(t.TempDir(), "nodeconfig.yaml")
	var ports [2]int
	for i := range ports {
		port, err := env.World.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = port
	}
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(partitionConfig, ports[0], ports[1])), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := env.StartNode(edgeMember, "--config="+cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		for _, n := range partitions {
			_ = hc.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	for _, n := range partitions {
		if err := env.WaitVirtualNodeReady(t.Context(), edgeMember, n, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	cpuOf := func(ctx context.Context, node string) (resource.Quantity, error) {
		n, err := hc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return resource.Quantity{}, err
		}
		return n.Status.Allocatable[corev1.ResourceCPU], nil
	}
	for _, n := range partitions {
		eventually(t, time.Minute, n+" offers its 3 nodes x 32 CPUs", func(ctx context.Context) (bool, string, error) {
			cpu, err := cpuOf(ctx, n)
			return err == nil && cpu.Cmp(resource.MustParse("96")) == 0, fmt.Sprint(cpu.String(), err), nil
		})
	}

	const ns = "edge"
	if _, err := hc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	labels := map[string]string{"app": "nginx"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](6),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{virtualNodeToleration, {Key: "flotilla.io/edge", Operator: corev1.TolerationOpExists}},
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
							{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: partitions}}}},
					}}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: wellknown.ClusterLabel,
						WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
					Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}},
				},
			},
		},
	}
	if _, err := hc.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "nginx-service", Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	if _, err := hc.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	nodeLocation := map[string]string{}
	for _, n := range edgeNodes() {
		nodeLocation[n.name] = n.labels["location"]
	}
	eventually(t, 2*time.Minute, "each branch namespace runs its share on its own nodes, with its nginx-service", func(ctx context.Context) (bool, string, error) {
		for _, vc := range partitions {
			memberNS := ns + "-" + vc
			loc := strings.TrimSuffix(strings.TrimPrefix(vc, "ke-"), "-cluster")
			pods, err := mc.CoreV1().Pods(memberNS).List(ctx, metav1.ListOptions{LabelSelector: "app=nginx"})
			if err != nil {
				return false, err.Error(), nil
			}
			running := 0
			for _, p := range pods.Items {
				if p.Spec.NodeName != "" && nodeLocation[p.Spec.NodeName] != loc {
					return false, "", fmt.Errorf("pod %s/%s of %s runs on %s in %s", memberNS, p.Name, vc, p.Spec.NodeName, nodeLocation[p.Spec.NodeName])
				}
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			if running != 3 {
				return false, fmt.Sprintf("%s: %d running", memberNS, running), nil
			}
			if _, err := mc.CoreV1().Services(memberNS).Get(ctx, "nginx-service", metav1.GetOptions{}); err != nil {
				return false, fmt.Sprintf("%s: %v", memberNS, err), nil
			}
		}
		return true, "", nil
	})

	// A pod bound straight to a branch whose own selector names the other
	// branch is refused with an event rather than left Pending in the member.
	contra := barePod(ns, "contradiction", "")
	contra.Spec.NodeSelector = map[string]string{"location": "hangzhou"}
	contra.Spec.NodeName = "ke-beijing-cluster"
	if _, err := hc.CoreV1().Pods(ns).Create(t.Context(), contra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "contradicting pod gets a Warning event", func(ctx context.Context) (bool, string, error) {
		evs, err := hostEvents(ctx, ns, contra.Name)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, e := range evs {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "contradicts") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events", len(evs)), nil
	})

	// Relabel one Beijing node as Hangzhou: capacity moves with it.
	patch := []byte(`{"metadata":{"labels":{"location":"hangzhou"}}}`)
	if _, err := mc.CoreV1().Nodes().Patch(t.Context(), "beijing-edge-3", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "capacity moves from ke-beijing-cluster to ke-hangzhou-cluster", func(ctx context.Context) (bool, string, error) {
		bj, err1 := cpuOf(ctx, "ke-beijing-cluster")
		hz, err2 := cpuOf(ctx, "ke-hangzhou-cluster")
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2), nil
		}
		// Forwarded pods are not subtracted: the host scheduler counts them.
		return bj.Cmp(resource.MustParse("64")) == 0 && hz.Cmp(resource.MustParse("128")) == 0, fmt.Sprintf("beijing %s hangzhou %s", bj.String(), hz.String()), nil
	})

	if err := hc.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "deleting namespace edge removes both branch namespaces", func(ctx context.Context) (bool, string, error) {
		for _, vc := range partitions {
			if _, err := mc.CoreV1().Namespaces().Get(ctx, ns+"-"+vc, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("%s-%s: %v", ns, vc, err), nil
			}
		}
		return true, "", nil
	})
}

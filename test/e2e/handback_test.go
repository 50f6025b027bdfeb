package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/testworld"
)

// holdGate keeps a test's pod unscheduled until the test lets it go.
const holdGate = "example.com/hold"

// release lifts holdGate from every pod of ns that has it.
func releaseHeld(ctx context.Context, ns string) error {
	pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		for i, g := range p.Spec.SchedulingGates {
			if g.Name != holdGate {
				continue
			}
			patch := fmt.Sprintf(`[{"op":"test","path":"/spec/schedulingGates/%d/name","value":%q},{"op":"remove","path":"/spec/schedulingGates/%d"}]`, i, holdGate, i)
			if _, err := hostClient().CoreV1().Pods(ns).Patch(ctx, p.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// copiesOf counts the member pods, in every member, that stand for the
// host pod ns/name, whatever their state.
func copiesOf(ctx context.Context, ns, name string) (map[string]int, error) {
	out := map[string]int{}
	for _, m := range members {
		pods, err := memberClient(m).CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: wellknown.ClusterLabel})
		if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			if p.Annotations[wellknown.HostNamespaceAnnotation] == ns && p.Annotations[wellknown.HostNameAnnotation] == name {
				out[m]++
			}
		}
	}
	return out, nil
}

// TestHandBackMovesAStatefulSetPod: db-0 is admitted while beijing fits it
// and bound there (it prefers beijing); then beijing's nodes are filled
// directly, so the member cannot schedule it. After handBackAfter (30 s)
// the pod is handed back, the StatefulSet makes db-0 again, and it runs in
// another cluster, while at no moment two member copies of db-0 exist.
func TestHandBackMovesAStatefulSetPod(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	labels := map[string]string{"app": "db"}
	tpl := bigPod(labels, "20", 0)
	tpl.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: holdGate}}
	tpl.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"beijing", "hangzhou"}}}}}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"beijing"}}}}}},
	}}
	create(t, hostClient().AppsV1().StatefulSets(ns).Create, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tpl},
	})
	eventually(t, time.Minute, "db-0 admitted", func(ctx context.Context) (bool, string, error) {
		_, err := hostClient().CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		return err == nil, "", nil
	})
	fill(t, "beijing", "20", "beijing-node-1", "beijing-node-2")

	// Watch for two copies from now to the end.
	var mu sync.Mutex
	var doubled string
	watch, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for watch.Err() == nil {
			if c, err := copiesOf(watch, ns, "db-0"); err == nil && c["beijing"]+c["hangzhou"]+c["shenzhen"] > 1 {
				mu.Lock()
				doubled = fmt.Sprint(c)
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })

	if err := releaseHeld(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "db-0 bound to beijing and unschedulable there", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil || p.Spec.NodeName == "" {
			return false, "", nil
		}
		if p.Spec.NodeName != "beijing" {
			return false, "", fmt.Errorf("db-0 went to %s first; the test needs it in beijing", p.Spec.NodeName)
		}
		m, err := memberPodOf(ctx, p)
		if err != nil || m == nil {
			return false, "", nil
		}
		for _, c := range m.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				return true, "", nil
			}
		}
		return false, fmt.Sprint(m.Status.Conditions), nil
	})
	eventually(t, 2*time.Minute, "the HandedBack event", func(ctx context.Context) (bool, string, error) {
		msgs, err := eventsOf(ctx, ns, "db-0", wellknown.EventHandedBack)
		if err != nil {
			return false, "", nil
		}
		for _, m := range msgs {
			if strings.Contains(m, "cluster beijing could not schedule this pod") && strings.Contains(m, "Insufficient cpu") {
				return true, "", nil
			}
		}
		return false, fmt.Sprint(msgs), nil
	})
	// The StatefulSet's new db-0 carries the hold too; let it go.
	var host *corev1.Pod
	eventually(t, 2*time.Minute, "db-0 running in hangzhou", func(ctx context.Context) (bool, string, error) {
		if err := releaseHeld(ctx, ns); err != nil {
			return false, err.Error(), nil
		}
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil || !podReady(p) {
			return false, "", nil
		}
		host = p
		return p.Spec.NodeName == "hangzhou", p.Spec.NodeName, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if doubled != "" {
		t.Errorf("two member copies of db-0 existed at once: %s", doubled)
	}
	if v := host.Annotations[wellknown.FitVerdictAnnotation]; !strings.Contains(v, "beijing: ") {
		t.Errorf("the new db-0 does not say why not beijing: %q", v)
	}
}

// withNodeConfig restarts member's flotilla-node with a NodeConfig of
// body (YAML after apiVersion and kind), and restarts it as it was when
// the test ends.
func withNodeConfig(t *testing.T, member, body string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nodeconfig.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: flotilla.io/v1alpha1\nkind: NodeConfig\n"+body+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	restart := func(ctx context.Context, args ...string) error {
		if p := env.Node(member); p != nil {
			if err := p.Stop(); err != nil {
				return err
			}
		}
		if _, err := env.StartNode(member, args...); err != nil {
			return err
		}
		return env.WaitNodeReady(ctx, member, time.Minute)
	}
	if err := restart(t.Context(), "--config="+path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restart(context.Background()); err != nil {
			t.Errorf("restart flotilla-node for %s: %v", member, err)
		}
	})
}

// TestGrowableMemberTakesTheBurst: pods of 40 cpu fit no node (32 cpu
// each). While no cluster can grow they wait in the host, saying so; once
// shenzhen is declared growable with 128-cpu nodes, the waiting pod and a
// burst after it all go Pending into shenzhen's member (where an
// autoscaler would see them) and nowhere else; a node added there, as the
// autoscaler would, runs them all.
func TestGrowableMemberTakesTheBurst(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	bare := func(name string) *corev1.Pod {
		tpl := bigPod(map[string]string{"app": "big"}, "40", 0)
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tpl.Labels}, Spec: tpl.Spec}
	}
	create(t, hostClient().CoreV1().Pods(ns).Create, bare("big-0"))
	eventually(t, time.Minute, "big-0 waiting in the host", func(ctx context.Context) (bool, string, error) {
		msgs, err := eventsOf(ctx, ns, "big-0", wellknown.EventNoClusterFits)
		if err != nil {
			return false, "", nil
		}
		for _, m := range msgs {
			if strings.Contains(m, "shenzhen: no node with 40 cpu free (largest 32)") {
				return true, "", nil
			}
		}
		return false, fmt.Sprint(msgs), nil
	})

	withNodeConfig(t, "shenzhen", `placement: {growable: true, nodeShapes: [{allocatable: {cpu: "128", memory: 512Gi}}]}`)
	waitModel(t, "shenzhen", "a node shape of 128 cpu", func(c *fit.Cluster) bool {
		return c.CanGrow(demand(corev1.ResourceList{corev1.ResourceCPU: mustQuantity("40")}, nil))
	})
	create(t, hostClient().AppsV1().Deployments(ns).Create, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "big"}},
			Template: bigPod(map[string]string{"app": "big"}, "40", 0)},
	})
	eventually(t, 2*time.Minute, "three pods Pending in shenzhen's member, unschedulable there", func(ctx context.Context) (bool, string, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=big"})
		if err != nil {
			return false, "", nil
		}
		waiting := 0
		var seen []string
		for i := range pods.Items {
			p := &pods.Items[i]
			seen = append(seen, p.Name+"@"+p.Spec.NodeName)
			if p.Spec.NodeName != "" && p.Spec.NodeName != "shenzhen" {
				return false, "", fmt.Errorf("%s went to %s", p.Name, p.Spec.NodeName)
			}
			m, err := memberPodOf(ctx, p)
			if p.Spec.NodeName == "" || err != nil || m == nil {
				continue
			}
			for _, c := range m.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					waiting++
				}
			}
		}
		return waiting == 3, strings.Join(seen, " "), nil
	})

	sz := env.World.Member("shenzhen")
	if err := sz.AddNode(t.Context(), testworld.NodeSpec{Name: "shenzhen-big-1",
		Labels:      map[string]string{corev1.LabelTopologyRegion: "cn-south", corev1.LabelTopologyZone: "cn-south-1"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("128"), corev1.ResourceMemory: mustQuantity("512Gi")}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The pods go with the namespace first, and are gone, then the
		// node. A node removed under running pods leaves them to the
		// member's pod garbage collector, for up to a minute, and their
		// host copies (40 cpu each) keep shenzhen full for the host
		// scheduler meanwhile: the next test would find it so.
		ctx := context.Background()
		_ = hostClient().CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("the test's pods still in the host after 2 minutes: %v", err)
		}
		_ = sz.RemoveNode(ctx, "shenzhen-big-1")
	})
	eventually(t, 2*time.Minute, "all three running on the new node", func(ctx context.Context) (bool, string, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=big"})
		if err != nil {
			return false, "", nil
		}
		running := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if !podReady(p) {
				continue
			}
			if m, err := memberPodOf(ctx, p); err == nil && m != nil && m.Spec.NodeName == "shenzhen-big-1" {
				running++
			}
		}
		return running == 3, fmt.Sprint(running), nil
	})
	msgs, err := eventsOf(t.Context(), ns, "big-0", wellknown.EventWaitingForNode)
	if err != nil || len(msgs) == 0 {
		t.Errorf("big-0 has no WaitingForNode event (%v)", err)
	}
}

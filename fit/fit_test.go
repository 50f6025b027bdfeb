package fit

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/wellknown"
)

// mnode is a member node with cpu cores, memory GiB and 110 pods.
func mnode(name string, cpu, memGi int64, labels map[string]string, extra ...any) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.HostnameLabel: name}}}
	for k, v := range labels {
		n.Labels[k] = v
	}
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	for _, e := range extra {
		switch e := e.(type) {
		case corev1.Taint:
			n.Spec.Taints = append(n.Spec.Taints, e)
		case corev1.ResourceList:
			for k, v := range e {
				n.Status.Allocatable[k] = v
			}
		}
	}
	return n
}

// using is a pod bound to node that requests cpu and memory.
func using(node, cpu, mem string) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c"}}}}
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
	if cpu != "" {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return p
}

type podOpt func(*corev1.Pod)

func wants(name corev1.ResourceName, q string) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests[name] = resource.MustParse(q) }
}

func selects(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[k] = v
	}
}

func requires(exprs ...corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}},
		}}}
	}
}

func tolerates(key string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	}
}

func pod(opts ...podOpt) *corev1.Pod {
	p := using("", "", "")
	for _, o := range opts {
		o(p)
	}
	return p
}

var gpu = corev1.ResourceName("nvidia.com/gpu")

func cluster(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, grow []NodeShape) *Cluster {
	t.Helper()
	m := Build(nodes, pods, grow)
	// What placement reads went through the annotation.
	back, err := Decode(m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	return NewClusterOf("beijing", map[string]string{wellknown.ClusterLabel: "beijing", "region": "north"}, back)
}

func TestCheck(t *testing.T) {
	two32 := []*corev1.Node{mnode("a", 32, 128, nil), mnode("b", 32, 128, nil)}
	fragmented := []*corev1.Pod{using("a", "20", "1Gi"), using("b", "20", "1Gi")}
	gpuNode := mnode("g", 8, 64, map[string]string{"nvidia.com/gpu.product": "A100"}, corev1.ResourceList{gpu: resource.MustParse("2")})
	ssd := []*corev1.Node{mnode("a", 8, 32, map[string]string{"disk": "ssd"}), mnode("b", 8, 32, map[string]string{"disk": "hdd"}), mnode("c", 8, 32, nil)}
	tainted := []*corev1.Node{mnode("a", 8, 32, nil, corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule})}
	soft := []*corev1.Node{mnode("a", 8, 32, nil, corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule})}
	lopsided := []*corev1.Node{mnode("a", 10, 1, nil), mnode("b", 1, 10, nil)}

	for name, tc := range map[string]struct {
		nodes  []*corev1.Node
		pods   []*corev1.Pod
		pod    *corev1.Pod
		fits   bool
		reason string
	}{
		"fragmented: the sum has 24 cpu, no node 20": {two32, fragmented, pod(wants(corev1.ResourceCPU, "20")), false, "no node with 20 cpu free (largest 12)"},
		"fragmented: 12 cpu fits one node":           {two32, fragmented, pod(wants(corev1.ResourceCPU, "12")), true, ""},
		"finished pods free their node": {two32, []*corev1.Pod{func() *corev1.Pod {
			p := using("a", "30", "")
			p.Status.Phase = corev1.PodSucceeded
			return p
		}()}, pod(wants(corev1.ResourceCPU, "32")), true, ""},
		"pods bound elsewhere do not count":   {two32, []*corev1.Pod{using("other", "32", "")}, pod(wants(corev1.ResourceCPU, "32")), true, ""},
		"a GPU one node has":                  {append(two32, gpuNode), nil, pod(wants(gpu, "1")), true, ""},
		"a GPU model one node has":            {append(two32, gpuNode), nil, pod(wants(gpu, "1"), selects("nvidia.com/gpu.product", "A100")), true, ""},
		"two GPUs of two":                     {append(two32, gpuNode), nil, pod(wants(gpu, "2")), true, ""},
		"three GPUs of two":                   {append(two32, gpuNode), nil, pod(wants(gpu, "3")), false, "no node with 3 nvidia.com/gpu free (largest 2)"},
		"no node has the resource":            {two32, nil, pod(wants(gpu, "1")), false, "no node has nvidia.com/gpu"},
		"memory":                              {two32, nil, pod(wants(corev1.ResourceMemory, "200Gi")), false, "no node with 200Gi memory free (largest 128Gi)"},
		"disk=ssd on one node":                {ssd, nil, pod(selects("disk", "ssd")), true, ""},
		"disk=nvme on none":                   {ssd, nil, pod(selects("disk", "nvme")), false, "no node matches disk=nvme"},
		"In":                                  {ssd, nil, pod(requires(corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"nvme", "ssd"}})), true, ""},
		"NotIn with every value excluded":     {ssd[:2], nil, pod(requires(corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"hdd", "ssd"}})), false, "no node matches disk NotIn [hdd,ssd]"},
		"DoesNotExist matches the plain node": {ssd, nil, pod(requires(corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpDoesNotExist})), true, ""},
		"Exists":                              {ssd[2:], nil, pod(requires(corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpExists})), false, "no node matches disk Exists"},
		"Gt on a numeric label": {[]*corev1.Node{mnode("a", 8, 32, map[string]string{"cores": "8"})}, nil,
			pod(requires(corev1.NodeSelectorRequirement{Key: "cores", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}})), true, ""},
		"Lt on a numeric label": {[]*corev1.Node{mnode("a", 8, 32, map[string]string{"cores": "8"})}, nil,
			pod(requires(corev1.NodeSelectorRequirement{Key: "cores", Operator: corev1.NodeSelectorOpLt, Values: []string{"4"}})), false, "no node matches cores Lt [4]"},
		"the virtual node's labels count on every node": {ssd, nil, pod(selects("region", "north"), selects("disk", "ssd")), true, ""},
		"a selector only the host can see":              {ssd, nil, pod(selects(wellknown.ClusterLabel, "hangzhou")), false, "no node matches the pod's node affinity"},
		"a hostname is not published":                   {ssd, nil, pod(selects(wellknown.HostnameLabel, "a")), false, "no node matches kubernetes.io/hostname=a"},
		"an untolerated taint":                          {tainted, nil, pod(), false, "no node tolerates taint dedicated=ml:NoSchedule"},
		"a tolerated taint":                             {tainted, nil, pod(tolerates("dedicated")), true, ""},
		"PreferNoSchedule does not keep pods off":       {soft, nil, pod(), true, ""},
		"each resource fits a node, not both at once": {lopsided, nil, pod(wants(corev1.ResourceCPU, "5"), wants(corev1.ResourceMemory, "5Gi")), false,
			"no node with 5 cpu and 5Gi memory free at once"},
		"no room for another pod": {[]*corev1.Node{mnode("a", 8, 32, nil, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})},
			[]*corev1.Pod{using("a", "", "")}, pod(), false, "no node with room for another pod"},
		"no nodes at all": {nil, nil, pod(), false, "no node matches the pod's node affinity"},
	} {
		t.Run(name, func(t *testing.T) {
			v := cluster(t, tc.nodes, tc.pods, nil).Check(DemandOf(tc.pod))
			if v.Fits != tc.fits || v.Reason != tc.reason || !v.Known {
				t.Errorf("got %+v, want fits=%v reason %q", v, tc.fits, tc.reason)
			}
		})
	}
}

func TestWithoutModelTheHostDecides(t *testing.T) {
	c, err := NewCluster(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old"}})
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Check(DemandOf(pod(wants(corev1.ResourceCPU, "1000")))); !v.Fits || v.Known {
		t.Errorf("a cluster without a model: %+v, want an unknown fit", v)
	}
	if _, known := c.Replicas(DemandOf(pod())); known {
		t.Error("a cluster without a model counted replicas")
	}
	if _, err := NewCluster(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bad", Annotations: map[string]string{wellknown.FitModelAnnotation: `{"resources":["cpu"],"groups":[{"free":[],"largest":[1,2]}]}`}}}); err == nil {
		t.Error("a malformed model was accepted")
	}
}

func TestReplicas(t *testing.T) {
	var ten []*corev1.Node
	for i := range 10 {
		ten = append(ten, mnode(fmt.Sprint("n", i), 4, 16, nil))
	}
	c := cluster(t, ten, nil, nil)
	for cpu, want := range map[string]int64{"6": 0, "4": 10, "2": 20, "1500m": 20} {
		if got, _ := c.Replicas(DemandOf(pod(wants(corev1.ResourceCPU, cpu)))); got != want {
			t.Errorf("ten 4-cpu nodes hold %d replicas of %s cpu, want %d", got, cpu, want)
		}
	}
	// The sum would say 40 cpu: 6 replicas of 6 cpu. It holds none.
	c = cluster(t, []*corev1.Node{mnode("a", 32, 128, nil), mnode("b", 32, 128, nil)}, []*corev1.Pod{using("a", "20", ""), using("b", "20", "")}, nil)
	if got, _ := c.Replicas(DemandOf(pod(wants(corev1.ResourceCPU, "6")))); got != 4 {
		t.Errorf("two nodes with 12 cpu free hold %d replicas of 6 cpu, want 4", got)
	}
	if got, _ := c.Replicas(DemandOf(pod(wants(gpu, "1")))); got != 0 {
		t.Errorf("%d replicas of a GPU pod without GPUs", got)
	}
}

func TestCanGrow(t *testing.T) {
	nodes := []*corev1.Node{mnode("small", 4, 16, nil), mnode("big", 16, 64, nil)}
	full := []*corev1.Pod{using("small", "4", ""), using("big", "16", "")}
	c := cluster(t, nodes, full, []NodeShape{})
	d := DemandOf(pod(wants(corev1.ResourceCPU, "10")))
	if v := c.Check(d); v.Fits {
		t.Fatal("a full cluster fits")
	}
	if !c.CanGrow(d) {
		t.Error("a 10-cpu pod cannot grow a cluster whose largest node has 16")
	}
	if c.CanGrow(DemandOf(pod(wants(corev1.ResourceCPU, "20")))) {
		t.Error("a 20-cpu pod grows a cluster whose largest node has 16")
	}
	if cluster(t, nodes, full, nil).CanGrow(d) {
		t.Error("a cluster that cannot grow grew")
	}
	shapes := []NodeShape{{Labels: map[string]string{"pool": "gpu"}, Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("4")}}}
	c = cluster(t, nodes, full, shapes)
	if c.CanGrow(DemandOf(pod(wants(gpu, "1")))) {
		t.Error("a GPU pod that does not tolerate the GPU pool's taint grows it")
	}
	if !c.CanGrow(DemandOf(pod(wants(gpu, "1"), tolerates("gpu"), selects("pool", "gpu")))) {
		t.Error("a GPU pod cannot grow a GPU pool")
	}
}

// TestLargeClusterModelStaysSmall: a thousand nodes of mixed shapes, used
// at random, make a model of a few kilobytes that never says more is free
// than some node has, and loses no node.
func TestLargeClusterModelStaysSmall(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 1000 {
		zone := fmt.Sprint("zone-", i%3)
		labels := map[string]string{corev1.LabelTopologyZone: zone, "instance-id": fmt.Sprint("i-", i), corev1.LabelInstanceTypeStable: "m5.8xlarge"}
		var extra []any
		if i%10 == 0 {
			labels[corev1.LabelInstanceTypeStable] = "p4d"
			extra = append(extra, corev1.ResourceList{gpu: resource.MustParse("8")})
		}
		nodes = append(nodes, mnode(fmt.Sprint("node-", i), 32, 128, labels, extra...))
		for range r.IntN(20) {
			pods = append(pods, using(fmt.Sprint("node-", i), fmt.Sprintf("%dm", 100+r.IntN(2000)), fmt.Sprintf("%dMi", 64+r.IntN(4096))))
		}
	}
	m := Build(nodes, pods, nil)
	size := len(m.Encode())
	t.Logf("1,000 nodes, %d pods: %d groups, %d bytes", len(pods), len(m.Groups), size)
	if size > 16<<10 {
		t.Errorf("the model of 1,000 nodes is %d bytes", size)
	}
	if len(m.Groups) != 6 {
		t.Errorf("%d groups, want 6 (3 zones x 2 instance types; instance IDs are per node)", len(m.Groups))
	}
	free := map[string][]int64{}
	for _, n := range nodes {
		free[n.Name] = Build([]*corev1.Node{n}, pods, nil).Groups[0].Free[0].Free
	}
	counted := 0
	for _, g := range m.Groups {
		if len(g.Free) > MaxSlots {
			t.Errorf("a group has %d slots", len(g.Free))
		}
		for _, s := range g.Free {
			counted += s.Nodes
			found := false
			for _, f := range free {
				if len(f) == len(s.Free) && covers(f, s.Free) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("slot %v: no node has that much free", s.Free)
			}
		}
	}
	if counted != 1000 {
		t.Errorf("the slots count %d nodes, want 1000", counted)
	}
}

func TestTooManyGroups(t *testing.T) {
	// Labels: the most varied key goes first, so the groups fit.
	var nodes []*corev1.Node
	for i := range 2 * MaxGroups {
		nodes = append(nodes, mnode(fmt.Sprint("n", i), 4, 16, map[string]string{"rack": fmt.Sprint(i), "pool": fmt.Sprint(i % 2)}))
	}
	m := Build(nodes, nil, nil)
	if len(m.Groups) != 2 || m.Omitted != 0 {
		t.Fatalf("%d nodes in 64 racks and 2 pools: %d groups, %d omitted; want the 2 pools", len(nodes), len(m.Groups), m.Omitted)
	}
	// Taints cannot be dropped: the smallest groups are left out, and a
	// pod that fits none of the others is not refused for it.
	nodes = nodes[:0]
	for i := range MaxGroups + 5 {
		nodes = append(nodes, mnode(fmt.Sprint("n", i), 4, 16, nil, corev1.Taint{Key: fmt.Sprint("t", i), Effect: corev1.TaintEffectNoSchedule}))
	}
	m = Build(nodes, nil, nil)
	if len(m.Groups) != MaxGroups || m.Omitted != 5 {
		t.Fatalf("%d groups and %d omitted of %d nodes", len(m.Groups), m.Omitted, len(nodes))
	}
	if v := NewClusterOf("c", nil, m).Check(DemandOf(pod())); !v.Fits || v.Known {
		t.Errorf("with nodes left out of the model, a pod that matches no group got %+v, want an unknown fit", v)
	}
}

// BenchmarkBuild: the model of 1,000 nodes running 10,000 pods, as
// flotilla-node rebuilds it after a member change.
func BenchmarkBuild(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 1000 {
		nodes = append(nodes, mnode(fmt.Sprint("node-", i), 32, 128, map[string]string{corev1.LabelTopologyZone: fmt.Sprint(i % 3)}))
		for range 10 {
			pods = append(pods, using(fmt.Sprint("node-", i), fmt.Sprintf("%dm", 100+r.IntN(2000)), fmt.Sprintf("%dMi", 64+r.IntN(4096))))
		}
	}
	b.ResetTimer()
	for range b.N {
		_ = Build(nodes, pods, nil).Encode()
	}
}

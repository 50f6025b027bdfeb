package fit

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

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
	two32 := []*corev1.Node{
		builder.Node("a").Hostname().CPU("32").Memory("128Gi").Pods("110").Obj(),
		builder.Node("b").Hostname().CPU("32").Memory("128Gi").Pods("110").Obj(),
	}
	fragmented := []*corev1.Pod{
		builder.Pod("").Node("a").CPU("20").Memory("1Gi").Obj(),
		builder.Pod("").Node("b").CPU("20").Memory("1Gi").Obj(),
	}
	gpuNode := builder.Node("g").Hostname().Label("nvidia.com/gpu.product", "A100").CPU("8").Memory("64Gi").Pods("110").Allocatable(gpu, "2").Obj()
	ssd := []*corev1.Node{
		builder.Node("a").Hostname().Label("disk", "ssd").CPU("8").Memory("32Gi").Pods("110").Obj(),
		builder.Node("b").Hostname().Label("disk", "hdd").CPU("8").Memory("32Gi").Pods("110").Obj(),
		builder.Node("c").Hostname().CPU("8").Memory("32Gi").Pods("110").Obj(),
	}
	tainted := []*corev1.Node{builder.Node("a").Hostname().CPU("8").Memory("32Gi").Pods("110").Taint("dedicated", "ml", corev1.TaintEffectNoSchedule).Obj()}
	soft := []*corev1.Node{builder.Node("a").Hostname().CPU("8").Memory("32Gi").Pods("110").Taint("soft", "", corev1.TaintEffectPreferNoSchedule).Obj()}
	lopsided := []*corev1.Node{
		builder.Node("a").Hostname().CPU("10").Memory("1Gi").Pods("110").Obj(),
		builder.Node("b").Hostname().CPU("1").Memory("10Gi").Pods("110").Obj(),
	}

	for name, tc := range map[string]struct {
		nodes  []*corev1.Node
		pods   []*corev1.Pod
		pod    *corev1.Pod
		fits   bool
		reason string
	}{
		"fragmented: the sum has 24 cpu, no node 20": {two32, fragmented, builder.Pod("").CPU("20").Obj(), false, "no node with 20 cpu free (largest 12)"},
		"fragmented: 12 cpu fits one node":           {two32, fragmented, builder.Pod("").CPU("12").Obj(), true, ""},
		"finished pods free their node": {two32, []*corev1.Pod{builder.Pod("").Node("a").CPU("30").Phase(corev1.PodSucceeded).Obj()},
			builder.Pod("").CPU("32").Obj(), true, ""},
		"pods bound elsewhere do not count":   {two32, []*corev1.Pod{builder.Pod("").Node("other").CPU("32").Obj()}, builder.Pod("").CPU("32").Obj(), true, ""},
		"a GPU one node has":                  {append(two32, gpuNode), nil, builder.Pod("").Request(gpu, "1").Obj(), true, ""},
		"a GPU model one node has":            {append(two32, gpuNode), nil, builder.Pod("").Request(gpu, "1").NodeSelector("nvidia.com/gpu.product", "A100").Obj(), true, ""},
		"two GPUs of two":                     {append(two32, gpuNode), nil, builder.Pod("").Request(gpu, "2").Obj(), true, ""},
		"three GPUs of two":                   {append(two32, gpuNode), nil, builder.Pod("").Request(gpu, "3").Obj(), false, "no node with 3 nvidia.com/gpu free (largest 2)"},
		"no node has the resource":            {two32, nil, builder.Pod("").Request(gpu, "1").Obj(), false, "no node has nvidia.com/gpu"},
		"memory":                              {two32, nil, builder.Pod("").Memory("200Gi").Obj(), false, "no node with 200Gi memory free (largest 128Gi)"},
		"disk=ssd on one node":                {ssd, nil, builder.Pod("").Container("c").NodeSelector("disk", "ssd").Obj(), true, ""},
		"disk=nvme on none":                   {ssd, nil, builder.Pod("").Container("c").NodeSelector("disk", "nvme").Obj(), false, "no node matches disk=nvme"},
		"In":                                  {ssd, nil, builder.Pod("").Container("c").RequiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"nvme", "ssd"}}).Obj(), true, ""},
		"NotIn with every value excluded":     {ssd[:2], nil, builder.Pod("").Container("c").RequiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"hdd", "ssd"}}).Obj(), false, "no node matches disk NotIn [hdd,ssd]"},
		"DoesNotExist matches the plain node": {ssd, nil, builder.Pod("").Container("c").RequiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpDoesNotExist}).Obj(), true, ""},
		"Exists":                              {ssd[2:], nil, builder.Pod("").Container("c").RequiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpExists}).Obj(), false, "no node matches disk Exists"},
		"Gt on a numeric label": {[]*corev1.Node{builder.Node("a").Hostname().Label("cores", "8").CPU("8").Memory("32Gi").Pods("110").Obj()}, nil,
			builder.Pod("").Container("c").RequiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "cores", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}).Obj(), true, ""},
		"Lt on a numeric label": {[]*corev1.Node{builder.Node("a").Hostname().Label("cores", "8").CPU("8").Memory("32Gi").Pods("110").Obj()}, nil,
			builder.Pod("").Container("c").RequiredNodeAffinity(corev1.NodeSelectorRequirement{Key: "cores", Operator: corev1.NodeSelectorOpLt, Values: []string{"4"}}).Obj(), false, "no node matches cores Lt [4]"},
		"the virtual node's labels count on every node": {ssd, nil, builder.Pod("").Container("c").NodeSelector("region", "north").NodeSelector("disk", "ssd").Obj(), true, ""},
		"a selector only the host can see":              {ssd, nil, builder.Pod("").Container("c").NodeSelector(wellknown.ClusterLabel, "hangzhou").Obj(), false, "no node matches the pod's node affinity"},
		"a hostname is not published":                   {ssd, nil, builder.Pod("").Container("c").NodeSelector(wellknown.HostnameLabel, "a").Obj(), false, "no node matches kubernetes.io/hostname=a"},
		"an untolerated taint":                          {tainted, nil, builder.Pod("").Container("c").Obj(), false, "no node tolerates taint dedicated=ml:NoSchedule"},
		"a tolerated taint":                             {tainted, nil, builder.Pod("").Container("c").Tolerate("dedicated").Obj(), true, ""},
		"PreferNoSchedule does not keep pods off":       {soft, nil, builder.Pod("").Container("c").Obj(), true, ""},
		"each resource fits a node, not both at once": {lopsided, nil, builder.Pod("").CPU("5").Memory("5Gi").Obj(), false,
			"no node with 5 cpu and 5Gi memory free at once"},
		"no room for another pod": {[]*corev1.Node{builder.Node("a").Hostname().CPU("8").Memory("32Gi").Pods("1").Obj()},
			[]*corev1.Pod{builder.Pod("").Node("a").Container("c").Obj()}, builder.Pod("").Container("c").Obj(), false, "no node with room for another pod"},
		"no nodes at all": {nil, nil, builder.Pod("").Container("c").Obj(), false, "no node matches the pod's node affinity"},
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
	if v := c.Check(DemandOf(builder.Pod("").CPU("1000").Obj())); !v.Fits || v.Known {
		t.Errorf("a cluster without a model: %+v, want an unknown fit", v)
	}
	if _, known := c.Replicas(DemandOf(builder.Pod("").Container("c").Obj())); known {
		t.Error("a cluster without a model counted replicas")
	}
	if _, err := NewCluster(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bad", Annotations: map[string]string{wellknown.FitModelAnnotation: `{"resources":["cpu"],"groups":[{"free":[],"largest":[1,2]}]}`}}}); err == nil {
		t.Error("a malformed model was accepted")
	}
}

func TestReplicas(t *testing.T) {
	var ten []*corev1.Node
	for i := range 10 {
		ten = append(ten, builder.Node(fmt.Sprint("n", i)).Hostname().CPU("4").Memory("16Gi").Pods("110").Obj())
	}
	c := cluster(t, ten, nil, nil)
	for cpu, want := range map[string]int64{"6": 0, "4": 10, "2": 20, "1500m": 20} {
		if got, _ := c.Replicas(DemandOf(builder.Pod("").CPU(cpu).Obj())); got != want {
			t.Errorf("ten 4-cpu nodes hold %d replicas of %s cpu, want %d", got, cpu, want)
		}
	}
	// The sum would say 40 cpu: 6 replicas of 6 cpu. It holds none.
	c = cluster(t, []*corev1.Node{
		builder.Node("a").Hostname().CPU("32").Memory("128Gi").Pods("110").Obj(),
		builder.Node("b").Hostname().CPU("32").Memory("128Gi").Pods("110").Obj(),
	}, []*corev1.Pod{builder.Pod("").Node("a").CPU("20").Obj(), builder.Pod("").Node("b").CPU("20").Obj()}, nil)
	if got, _ := c.Replicas(DemandOf(builder.Pod("").CPU("6").Obj())); got != 4 {
		t.Errorf("two nodes with 12 cpu free hold %d replicas of 6 cpu, want 4", got)
	}
	if got, _ := c.Replicas(DemandOf(builder.Pod("").Request(gpu, "1").Obj())); got != 0 {
		t.Errorf("%d replicas of a GPU pod without GPUs", got)
	}
}

func TestCanGrow(t *testing.T) {
	nodes := []*corev1.Node{
		builder.Node("small").Hostname().CPU("4").Memory("16Gi").Pods("110").Obj(),
		builder.Node("big").Hostname().CPU("16").Memory("64Gi").Pods("110").Obj(),
	}
	full := []*corev1.Pod{builder.Pod("").Node("small").CPU("4").Obj(), builder.Pod("").Node("big").CPU("16").Obj()}
	c := cluster(t, nodes, full, []NodeShape{})
	d := DemandOf(builder.Pod("").CPU("10").Obj())
	if v := c.Check(d); v.Fits {
		t.Fatal("a full cluster fits")
	}
	if !c.CanGrow(d) {
		t.Error("a 10-cpu pod cannot grow a cluster whose largest node has 16")
	}
	if c.CanGrow(DemandOf(builder.Pod("").CPU("20").Obj())) {
		t.Error("a 20-cpu pod grows a cluster whose largest node has 16")
	}
	if cluster(t, nodes, full, nil).CanGrow(d) {
		t.Error("a cluster that cannot grow grew")
	}
	shapes := []NodeShape{{Labels: map[string]string{"pool": "gpu"}, Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("4")}}}
	c = cluster(t, nodes, full, shapes)
	if c.CanGrow(DemandOf(builder.Pod("").Request(gpu, "1").Obj())) {
		t.Error("a GPU pod that does not tolerate the GPU pool's taint grows it")
	}
	if !c.CanGrow(DemandOf(builder.Pod("").Request(gpu, "1").Tolerate("gpu").NodeSelector("pool", "gpu").Obj())) {
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
		n := builder.Node(fmt.Sprint("node-", i)).Hostname().CPU("32").Memory("128Gi").Pods("110")
		if i%10 == 0 {
			labels[corev1.LabelInstanceTypeStable] = "p4d"
			n.Allocatable(gpu, "8")
		}
		nodes = append(nodes, n.Labels(labels).Obj())
		for range r.IntN(20) {
			pods = append(pods, builder.Pod("").Node(fmt.Sprint("node-", i)).CPU(fmt.Sprintf("%dm", 100+r.IntN(2000))).Memory(fmt.Sprintf("%dMi", 64+r.IntN(4096))).Obj())
		}
	}
	m := Build(nodes, pods, nil)
	size := len(m.Encode())
	t.Logf("1,000 nodes, %d pods: %d groups, %d bytes", len(pods), len(m.Groups), size)
	if size > 16<<10 {
		t.Errorf("the model of 1,000 nodes is %d bytes", size)
	}
	// The pods forwarded, of six priorities: the room preempting them
	// makes at most doubles the model.
	for i, p := range pods {
		p.Spec.Priority = ptr.To(int32(i%6) * 100)
	}
	withRoom := len(BuildOf(nodes, pods, func(*corev1.Pod) bool { return true }, nil).Encode())
	t.Logf("with the room preempting makes: %d bytes", withRoom)
	if withRoom > 2*size+2<<10 {
		t.Errorf("with the room preempting makes, the model of 1,000 nodes is %d bytes, %d without", withRoom, size)
	}
	// Half of them the member's own: the room the member's scheduler
	// makes at most triples it.
	withOwn := len(BuildOf(nodes, pods, func(p *corev1.Pod) bool { return *p.Spec.Priority%200 == 0 }, nil).Encode())
	t.Logf("with the room the member's scheduler makes too: %d bytes", withOwn)
	if withOwn > 3*size+4<<10 {
		t.Errorf("with the room preempting makes in the host and in the member, the model of 1,000 nodes is %d bytes, %d without", withOwn, size)
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
		nodes = append(nodes, builder.Node(fmt.Sprint("n", i)).Hostname().Labels(map[string]string{"rack": fmt.Sprint(i), "pool": fmt.Sprint(i % 2)}).CPU("4").Memory("16Gi").Pods("110").Obj())
	}
	m := Build(nodes, nil, nil)
	if len(m.Groups) != 2 || m.Omitted != 0 {
		t.Fatalf("%d nodes in 64 racks and 2 pools: %d groups, %d omitted; want the 2 pools", len(nodes), len(m.Groups), m.Omitted)
	}
	// Taints cannot be dropped: the smallest groups are left out, and a
	// pod that fits none of the others is not refused for it.
	nodes = nodes[:0]
	for i := range MaxGroups + 5 {
		nodes = append(nodes, builder.Node(fmt.Sprint("n", i)).Hostname().CPU("4").Memory("16Gi").Pods("110").Taint(fmt.Sprint("t", i), "", corev1.TaintEffectNoSchedule).Obj())
	}
	m = Build(nodes, nil, nil)
	if len(m.Groups) != MaxGroups || m.Omitted != 5 {
		t.Fatalf("%d groups and %d omitted of %d nodes", len(m.Groups), m.Omitted, len(nodes))
	}
	if v := NewClusterOf("c", nil, m).Check(DemandOf(builder.Pod("").Container("c").Obj())); !v.Fits || v.Known {
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
		nodes = append(nodes, builder.Node(fmt.Sprint("node-", i)).Hostname().Labels(map[string]string{corev1.LabelTopologyZone: fmt.Sprint(i % 3)}).CPU("32").Memory("128Gi").Pods("110").Obj())
		for range 10 {
			pods = append(pods, builder.Pod("").Node(fmt.Sprint("node-", i)).CPU(fmt.Sprintf("%dm", 100+r.IntN(2000))).Memory(fmt.Sprintf("%dMi", 64+r.IntN(4096))).Obj())
		}
	}
	b.ResetTimer()
	for range b.N {
		_ = Build(nodes, pods, nil).Encode()
	}
}

// TestCheckPreempting: a pod that fits no node now fits by the host
// preempting when the pods the virtual node forwarded with a lower
// priority hold enough on one node, and by the member's scheduler
// preempting when those and the member's own pods of lower priority do;
// never by preempting its equals, or when its preemption policy is Never.
func TestCheckPreempting(t *testing.T) {
	two32 := []*corev1.Node{
		builder.Node("a").Hostname().CPU("32").Memory("128Gi").Pods("110").Obj(),
		builder.Node("b").Hostname().CPU("32").Memory("128Gi").Pods("110").Obj(),
	}
	forwarded := func(p *corev1.Pod) bool { return p.Labels["forwarded"] == "true" }
	low := func(node string, cpu string, priority int32) *corev1.Pod {
		return builder.Pod("").Node(node).CPU(cpu).Label("forwarded", "true").Priority("low", priority).Obj()
	}
	own := func(node string, cpu string, priority int32) *corev1.Pod {
		return builder.Pod("").Node(node).CPU(cpu).Priority("member", priority).Obj()
	}
	full := []*corev1.Pod{low("a", "15", 10), low("a", "15", 10), low("b", "15", 10), low("b", "15", 10)}
	mixed := []*corev1.Pod{low("a", "15", 10), low("a", "15", 500), low("b", "15", 500), low("b", "15", 500)}
	owned := []*corev1.Pod{own("a", "30", 1), own("b", "30", 1)}
	both := []*corev1.Pod{low("a", "15", 10), own("a", "15", 500), own("b", "15", 10), own("b", "15", 500)}
	for name, tc := range map[string]struct {
		pods                   []*corev1.Pod
		pod                    *corev1.Pod
		fits                   bool
		preempting, byTheirOwn bool
	}{
		"a higher priority preempts":            {full, builder.Pod("").CPU("15").Priority("high", 1000).Obj(), false, true, false},
		"an equal priority does not":            {full, builder.Pod("").CPU("15").Priority("low", 10).Obj(), false, false, false},
		"no priority does not":                  {full, builder.Pod("").CPU("15").Obj(), false, false, false},
		"preemption policy Never does not":      {full, builder.Pod("").CPU("15").Priority("high", 1000).NeverPreempt().Obj(), false, false, false},
		"more than a node holds":                {full, builder.Pod("").CPU("33").Priority("high", 1000).Obj(), false, false, false},
		"a whole node":                          {full, builder.Pod("").CPU("32").Priority("high", 1000).Obj(), false, true, false},
		"what fits outright fits":               {full, builder.Pod("").CPU("2").Priority("high", 1000).Obj(), true, false, false},
		"only the lower of two priorities goes": {mixed, builder.Pod("").CPU("17").Priority("mid", 100).Obj(), false, true, false},
		"not enough below the pod's priority":   {mixed, builder.Pod("").CPU("18").Priority("mid", 100).Obj(), false, false, false},
		"above both, a whole node":              {mixed, builder.Pod("").CPU("32").Priority("high", 1000).Obj(), false, true, false},
		"the member's own pods, by the member":  {owned, builder.Pod("").CPU("15").Priority("high", 1000).Obj(), false, false, true},
		"the member's own of an equal priority": {owned, builder.Pod("").CPU("15").Priority("one", 1).Obj(), false, false, false},
		"the member's own, Never":               {owned, builder.Pod("").CPU("15").Priority("high", 1000).NeverPreempt().Obj(), false, false, false},
		"the host's and the member's own":       {both, builder.Pod("").CPU("17").Priority("mid", 100).Obj(), false, true, true},
		"the two together, by the member":       {both, builder.Pod("").CPU("32").Priority("high", 1000).Obj(), false, false, true},
		"the member's own of a higher priority": {both, builder.Pod("").CPU("18").Priority("mid", 100).Obj(), false, false, false},
		"room split over two nodes is no room": {[]*corev1.Pod{low("a", "20", 10), own("a", "10", 1000), low("b", "20", 10), own("b", "10", 1000)},
			builder.Pod("").CPU("25").Priority("high", 1000).Obj(), false, false, false},
	} {
		t.Run(name, func(t *testing.T) {
			back, err := Decode(BuildOf(two32, tc.pods, forwarded, nil).Encode())
			if err != nil {
				t.Fatal(err)
			}
			v := NewClusterOf("beijing", nil, back).Check(DemandOf(tc.pod))
			if v.Fits != tc.fits || v.Preempting != tc.preempting || v.MemberPreempting != tc.byTheirOwn || !v.Known {
				t.Errorf("got %+v, want fits=%v preempting=%v memberPreempting=%v", v, tc.fits, tc.preempting, tc.byTheirOwn)
			}
		})
	}
}

// TestPreemptibleRoomStaysSmall: a group tells the room of at most
// MaxPriorities priorities, the lowest, and models without it (older
// flotilla-nodes') still read.
func TestPreemptibleRoomStaysSmall(t *testing.T) {
	nodes := []*corev1.Node{builder.Node("a").Hostname().CPU("32").Memory("128Gi").Pods("110").Obj()}
	var pods []*corev1.Pod
	for p := range int32(12) {
		pods = append(pods, builder.Pod("").Node("a").CPU("2").Label("f", "y").Priority("", p*10).Obj())
	}
	m := BuildOf(nodes, pods, func(p *corev1.Pod) bool { return p.Labels["f"] == "y" }, nil)
	if got := len(m.Groups[0].Preempt); got != MaxPriorities {
		t.Fatalf("%d priorities kept, want %d", got, MaxPriorities)
	}
	if last := m.Groups[0].Preempt[MaxPriorities-1]; last.Upto != 30 || last.Free[0].Free[0] != 8000+8000 {
		t.Errorf("the highest priority kept: %+v, want upto 30 with 16 cpu free", last)
	}
	// A pod above every priority is told of the room below the highest
	// kept: less than preempting would make, never more.
	c := NewClusterOf("x", nil, m)
	if v := c.Check(DemandOf(builder.Pod("").CPU("16").Priority("", 1000).Obj())); !v.Preempting {
		t.Errorf("16 cpu by preempting: %+v", v)
	}
	if v := c.Check(DemandOf(builder.Pod("").CPU("17").Priority("", 1000).Obj())); v.Preempting {
		t.Errorf("17 cpu by preempting: %+v, want more than the model tells", v)
	}
	if m.Groups[0].MemberPreempt != nil {
		t.Errorf("with every pod forwarded, the room the member's scheduler makes is told apart: %+v", m.Groups[0].MemberPreempt)
	}
	old := `{"resources":["cpu","memory","pods"],"groups":[{"free":[{"n":1,"v":[1000,0,10]}],"largest":[1000,0,10]}]}`
	if _, err := Decode(old); err != nil {
		t.Errorf("a model without preemptible room: %v", err)
	}
	bad := `{"resources":["cpu","memory","pods"],"groups":[{"free":[{"n":1,"v":[1000,0,10]}],"largest":[1000,0,10],"memberPreempt":[{"upto":1,"free":[{"n":1,"v":[1]}]}]}]}`
	if _, err := Decode(bad); err == nil {
		t.Error("a model whose member's preemptible room lacks resources was read")
	}
}

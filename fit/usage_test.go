package fit

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flotilla.io/flotilla/internal/builder"
)

func byGroupLabel(o metav1.Object) string { return o.GetLabels()["group"] }

// TestUsageFollowsPods: after any sequence of pods coming, moving,
// finishing, changing group and going, what a Usage holds is what counting
// the pods there are now gives, and it holds nothing once they are gone.
func TestUsageFollowsPods(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	nodes := []string{"", "n1", "n2", "n3"}
	groups := []string{"", "a", "b"}
	phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
	u := NewUsage(byGroupLabel)
	live := map[types.UID]*corev1.Pod{}
	generations := map[types.UID]int64{}
	for step := range 1000 {
		uid := types.UID(fmt.Sprint(r.IntN(40)))
		if r.IntN(5) == 0 {
			delete(live, uid)
			u.Delete(uid)
		} else {
			b := builder.Pod("").UID(string(uid)).Node(nodes[r.IntN(len(nodes))]).
				CPU(fmt.Sprintf("%dm", 100*r.IntN(3))).Memory(fmt.Sprintf("%dMi", 64*r.IntN(3))).
				Label("group", groups[r.IntN(len(groups))]).Phase(phases[r.IntN(len(phases))]).
				Priority("", int32(r.IntN(3)))
			// A new generation with every new spec; pods of members
			// older than Kubernetes 1.33 have none.
			if r.IntN(4) > 0 {
				generations[uid]++
				b.Generation(generations[uid])
			}
			p := b.Obj()
			live[uid] = p
			u.Set(p)
		}
		var pods []*corev1.Pod
		for _, p := range live {
			pods = append(pods, p)
		}
		want := UsageOf(pods, byGroupLabel)
		for _, n := range nodes {
			for _, g := range groups {
				wa, wg := want.Of(n, g)
				ga, gg := u.Of(n, g)
				if d := cmp.Diff(wa, ga, cmpopts.EquateEmpty()); d != "" {
					t.Fatalf("step %d: use of %q (-want +got):\n%s", step, n, d)
				}
				if d := cmp.Diff(wg, gg, cmpopts.EquateEmpty()); d != "" {
					t.Fatalf("step %d: use of group %q on %q (-want +got):\n%s", step, g, n, d)
				}
				if d := cmp.Diff(want.ByPriority(n, g), u.ByPriority(n, g), cmpopts.EquateEmpty()); d != "" {
					t.Fatalf("step %d: use by priority of group %q on %q (-want +got):\n%s", step, g, n, d)
				}
			}
			if d := cmp.Diff(want.AllByPriority(n), u.AllByPriority(n), cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("step %d: use by priority on %q (-want +got):\n%s", step, n, d)
			}
		}
	}
	for uid := range live {
		u.Delete(uid)
	}
	if u.Len() != 0 || len(u.nodes) != 0 || len(u.shared) != 0 {
		t.Errorf("with every pod gone, %d pods, %d nodes and %d uses are kept", u.Len(), len(u.nodes), len(u.shared))
	}
}

// TestUsageReadsAPodAgainOnlyWhenItsSpecChanged: the same generation on the
// same node is the same spec, which is not read again; a pod without a
// generation is read every time.
func TestUsageReadsAPodAgainOnlyWhenItsSpecChanged(t *testing.T) {
	u := NewUsage(nil)
	u.Set(builder.Pod("").Node("n1").CPU("1").UID("a").Generation(1).Obj())
	u.Set(builder.Pod("").Node("n1").CPU("9").UID("a").Generation(1).Obj())
	if all, _ := u.Of("n1", ""); all[corev1.ResourceCPU] != 1000 {
		t.Errorf("cpu used after a status update = %dm, want 1000m", all[corev1.ResourceCPU])
	}
	u.Set(builder.Pod("").Node("n1").CPU("2").UID("a").Generation(2).Obj())
	if all, _ := u.Of("n1", ""); all[corev1.ResourceCPU] != 2000 {
		t.Errorf("cpu used after a resize = %dm, want 2000m", all[corev1.ResourceCPU])
	}
	u.Set(builder.Pod("").Node("n1").CPU("1").UID("b").Obj())
	u.Set(builder.Pod("").Node("n1").CPU("3").UID("b").Obj())
	if all, _ := u.Of("n1", ""); all[corev1.ResourceCPU] != 5000 || all[corev1.ResourcePods] != 2 {
		t.Errorf("use of n1 = %v, want 5000m of cpu by 2 pods", all)
	}
	// Pods that ask for the same share one Use.
	u.Set(builder.Pod("").Node("n2").CPU("2").UID("c").Generation(1).Obj())
	if len(u.shared) != 2 {
		t.Errorf("%d uses kept for pods asking for 2 and 3 cpus, want 2", len(u.shared))
	}
}

// TestModelFromUsage: the model built from the usage kept as pods change is
// the model built by counting the pods.
func TestModelFromUsage(t *testing.T) {
	nodes := []*corev1.Node{
		builder.Node("n1").Hostname().CPU("4").Memory("8Gi").Pods("110").Obj(),
		builder.Node("n2").Hostname().CPU("4").Memory("8Gi").Pods("110").Obj(),
	}
	pods := []*corev1.Pod{
		builder.Pod("").Node("n1").CPU("500m").Memory("1Gi").UID("a").Generation(1).Obj(),
		builder.Pod("").Node("n1").CPU("1").UID("b").Generation(1).Obj(),
		builder.Pod("").Node("n2").CPU("3").Memory("7Gi").UID("c").Generation(1).Obj(),
	}
	u := NewUsage(nil)
	for _, p := range pods {
		u.Set(p)
	}
	u.Set(builder.Pod("").Node("n2").CPU("1").UID("gone").Generation(1).Obj())
	u.Delete("gone")
	used := func(node string) NodeUse { all, _ := u.Of(node, ""); return NodeUse{All: all} }
	if d := cmp.Diff(Build(nodes, pods, nil).Encode(), BuildFrom(nodes, used, nil).Encode()); d != "" {
		t.Errorf("model from the usage (-want +got):\n%s", d)
	}
}

// BenchmarkRebuild: a model of 10,000 pods on 100 nodes rebuilt after a
// change, counting the pods afresh and from the usage kept.
func BenchmarkRebuild(b *testing.B) {
	var nodes []*corev1.Node
	for i := range 100 {
		nodes = append(nodes, builder.Node(fmt.Sprintf("n%d", i)).Hostname().CPU("64").Memory("256Gi").Pods("110").Obj())
	}
	var pods []*corev1.Pod
	for i := range 10000 {
		pods = append(pods, builder.Pod("").Node(fmt.Sprintf("n%d", i%100)).CPU("10m").Memory("16Mi").UID(fmt.Sprint(i)).Generation(1).Obj())
	}
	b.Run("afresh", func(b *testing.B) {
		for b.Loop() {
			Build(nodes, pods, nil)
		}
	})
	b.Run("usage", func(b *testing.B) {
		u := NewUsage(nil)
		for _, p := range pods {
			u.Set(p)
		}
		used := func(node string) NodeUse { all, _ := u.Of(node, ""); return NodeUse{All: all} }
		for b.Loop() {
			BuildFrom(nodes, used, nil)
		}
	})
}

package plugin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"flotilla.io/flotilla/internal/builder"
)

const restartAll = "RestartAllContainersOnContainerExits"

// TestExplainNamesUndeclaredFeatures: when the host scheduler leaves the
// virtual nodes out because they do not declare a feature the pod needs,
// explain names the feature, the clusters that declare it, and what makes
// a cluster declare it; otherwise it reads no nodes for it.
func TestExplainNamesUndeclaredFeatures(t *testing.T) {
	const lacking = "0/4 nodes are available: 3 node(s) didn't match Pod's required features, 1 node(s) had untolerated taint(s). preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
	pending := func() *corev1.Pod {
		return builder.Pod("web-1").Namespace("shop").Container("web").RestartAllContainersOnExit(42).
			Phase(corev1.PodPending).Condition(corev1.PodScheduled, corev1.ConditionFalse).Obj()
	}
	withMessage := func(p *corev1.Pod, m string) *corev1.Pod {
		p.Status.Conditions[0].Message = m
		return p
	}
	hostNode := builder.Node("control-plane").Declares(restartAll).Obj() // not a cluster
	cases := map[string]struct {
		pod     *corev1.Pod
		nodes   []runtime.Object
		want    []NodeFeature
		verdict string
		line    string
	}{
		"no cluster declares it": {
			pod:     withMessage(pending(), lacking),
			nodes:   []runtime.Object{builder.VirtualNode("beijing").Obj(), builder.VirtualNode("hangzhou").Obj(), hostNode},
			want:    []NodeFeature{{Name: restartAll, DeclaredBy: []string{}}},
			verdict: "Pending in the host, no cluster declares the node features it needs: " + restartAll + " (a cluster declares a feature when one of its Ready member nodes does: Kubernetes 1.36 or later, with the feature on)",
			line:    "Node features:    " + restartAll + " (declared by no cluster)",
		},
		"a cluster declares it": {
			pod:     withMessage(pending(), lacking),
			nodes:   []runtime.Object{builder.VirtualNode("beijing").Obj(), builder.VirtualNode("hangzhou").Declares(restartAll).Obj(), hostNode},
			want:    []NodeFeature{{Name: restartAll, DeclaredBy: []string{"hangzhou"}}},
			verdict: "Pending in the host, not scheduled: " + lacking,
			line:    "Node features:    " + restartAll + " (declared by hangzhou)",
		},
		"the scheduler says nothing of features": {
			pod:     withMessage(pending(), "0/3 nodes are available: 3 Insufficient cpu."),
			nodes:   []runtime.Object{builder.VirtualNode("beijing").Obj()},
			verdict: "Pending in the host, not scheduled: 0/3 nodes are available: 3 Insufficient cpu.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset(append(tc.nodes, tc.pod)...)
			x, err := Explain(t.Context(), c, "shop", "web-1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, x.NodeFeatures); diff != "" {
				t.Errorf("node features (-want +got):\n%s", diff)
			}
			if x.Verdict != tc.verdict {
				t.Errorf("verdict\n got %q\nwant %q", x.Verdict, tc.verdict)
			}
			var out bytes.Buffer
			if err := printExplanations(&out, []*Explanation{x}, "", now); err != nil {
				t.Fatal(err)
			}
			if tc.line != "" && !strings.Contains(out.String(), tc.line) {
				t.Errorf("the text has no line %q:\n%s", tc.line, out.String())
			}
			if tc.line == "" && strings.Contains(out.String(), "Node features") {
				t.Errorf("the text speaks of node features:\n%s", out.String())
			}
		})
	}
}

package builder

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestNoBinaryLinksTheBuilders: the builders are for tests; a binary that
// links them carries test code.
func TestNoBinaryLinksTheBuilders(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the binaries' dependencies")
	}
	const self = "flotilla.io/flotilla/internal/builder"
	out, err := exec.Command(gobin, "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}} {{join .Deps " "}}{{end}}`,
		"flotilla.io/flotilla/cmd/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var binaries []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		binaries = append(binaries, fields[0])
		if slices.Contains(fields[1:], self) {
			t.Errorf("%s links %s", fields[0], self)
		}
	}
	for _, want := range []string{"cmd/flotilla-node", "cmd/flotilla-policy", "cmd/kubectl-flotilla"} {
		if !slices.Contains(binaries, "flotilla.io/flotilla/"+want) {
			t.Errorf("go list did not find %s among the binaries %v", want, binaries)
		}
	}
}

// TestBuilders: a chain sets exactly the fields it names, metadata and
// kind-specific setters mix in one chain, and setting a condition twice
// keeps one.
func TestBuilders(t *testing.T) {
	at := time.Unix(100, 0)
	pod := Pod("web-1").Namespace("shop").Node("beijing").CPU("500m").Label("app", "web").Memory("1Gi").
		ControlledBy("ReplicaSet", "web-x", "rs").Condition(corev1.PodReady, corev1.ConditionFalse).
		Condition(corev1.PodReady, corev1.ConditionTrue).Phase(corev1.PodRunning).Started(at).Obj()
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-x", UID: "rs", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "beijing", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: at},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if !equality.Semantic.DeepEqual(want, pod) {
		t.Errorf("pod (-want +got):\n%s", cmp.Diff(want, pod))
	}

	node := VirtualNode("beijing").CPU("64").NotReady().Ready().Taint("k", "v", corev1.TaintEffectNoSchedule).Obj()
	wantNode := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "beijing", Labels: map[string]string{"type": "virtual-kubelet", "flotilla.io/cluster": "beijing"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	if !equality.Semantic.DeepEqual(wantNode, node) {
		t.Errorf("node (-want +got):\n%s", cmp.Diff(wantNode, node))
	}

	d := Deployment("web").Namespace("shop").UID("dep").Generation(2).Replicas(3).Obj()
	wantD := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "dep", Generation: 2},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}
	if !equality.Semantic.DeepEqual(wantD, d) {
		t.Errorf("deployment (-want +got):\n%s", cmp.Diff(wantD, d))
	}
}

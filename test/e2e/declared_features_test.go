package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// restartAllContainers is the node feature a pod whose container restarts
// all of the pod's containers on exit needs (Kubernetes 1.36+).
const restartAllContainers = "RestartAllContainersOnContainerExits"

// firstDeclaring is the first Kubernetes version whose kubelets declare
// node features and whose scheduler filters nodes on them.
var firstDeclaring = version.MajorMinor(1, 36)

// TestDeclaredFeatures: a virtual node declares the features one of its
// member's Ready nodes declares, so that the host scheduler (1.36+) places
// a pod that needs one, here a restartPolicyRules action
// RestartAllContainers, on that cluster and the member's scheduler on that
// node; a cluster whose nodes declare nothing (kwok's, or a member older
// than 1.36) never gets such a pod; and when no cluster declares the
// feature, kubectl flotilla explain names it.
func TestDeclaredFeatures(t *testing.T) {
	ctx := t.Context()
	if v := parsedServerVersion(t, hostClient()); v.LessThan(firstDeclaring) {
		t.Fatalf("the e2e world's host runs Kubernetes %s: its scheduler does not filter nodes on declared features before %s, so this test proves nothing there", v, firstDeclaring)
	}
	var declaring, other string
	for _, m := range members {
		if declaring == "" && !parsedServerVersion(t, memberClient(m)).LessThan(firstDeclaring) {
			declaring = m
		} else if other == "" {
			other = m
		}
	}
	if declaring == "" {
		t.Fatalf("no member of the e2e world runs Kubernetes %s or later: their nodes cannot declare features", firstDeclaring)
	}
	ns := namespace(t)
	drained(t, ns)
	memberNode := declaring + "-node-1"

	// kwok's nodes declare nothing: one node says what a kubelet of 1.36
	// with the feature on says.
	declareOn(t, declaring, memberNode, []string{restartAllContainers})
	t.Cleanup(func() { declareOn(t, declaring, memberNode, nil) })
	waitDeclares(t, declaring, true)
	waitDeclares(t, other, false)

	restart := restartAllPod(ns, "restart-all")
	create(t, hostClient().CoreV1().Pods(ns).Create, restart)
	pod := waitPodReady(t, ns, restart.Name)
	if pod.Spec.NodeName != declaring {
		t.Fatalf("pod %s needing %s runs in cluster %s, want %s, the one cluster that declares it", pod.Name, restartAllContainers, pod.Spec.NodeName, declaring)
	}
	mp, err := memberPodOf(ctx, pod)
	if err != nil || mp == nil {
		t.Fatalf("member pod of %s: %v %v", pod.Name, mp, err)
	}
	if mp.Spec.NodeName != memberNode {
		t.Errorf("member pod runs on %s, want %s, the member node that declares %s", mp.Spec.NodeName, memberNode, restartAllContainers)
	}

	pinned := restartAllPod(ns, "pinned")
	pinned.Spec.NodeSelector = map[string]string{wellknown.ClusterLabel: other}
	create(t, hostClient().CoreV1().Pods(ns).Create, pinned)
	waitUnschedulable(t, ns, pinned.Name, "didn't match Pod's required features")
	explainSays(t, ns, pinned.Name, "Node features:    "+restartAllContainers+" (declared by "+declaring+")")

	// Once no member node declares it, no cluster does, and explain says
	// that is why a new pod waits.
	declareOn(t, declaring, memberNode, nil)
	waitDeclares(t, declaring, false)
	nowhere := restartAllPod(ns, "nowhere")
	create(t, hostClient().CoreV1().Pods(ns).Create, nowhere)
	waitUnschedulable(t, ns, nowhere.Name, "didn't match Pod's required features")
	explainSays(t, ns, nowhere.Name, ns+"/nowhere: Pending in the host, no cluster declares the node features it needs: "+restartAllContainers)
}

// restartAllPod is a pod for any cluster whose container, when it exits
// with code 42, restarts all of the pod's containers.
func restartAllPod(ns, name string) *corev1.Pod {
	p := barePod(ns, name, "")
	p.Spec.NodeSelector = nil
	c := &p.Spec.Containers[0]
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
	c.RestartPolicyRules = []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}
	return p
}

// parsedServerVersion is the Kubernetes version c's apiserver runs.
func parsedServerVersion(t *testing.T, c kubernetes.Interface) *version.Version {
	t.Helper()
	info, err := c.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// declareOn sets the features member node node of cluster member declares,
// as its kubelet would (nil: none), and checks that the member kept them.
func declareOn(t *testing.T, member, node string, features []string) {
	t.Helper()
	list := "null"
	if features != nil {
		list = `["` + strings.Join(features, `","`) + `"]`
	}
	n, err := memberClient(member).CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType,
		[]byte(`{"status":{"declaredFeatures":`+list+`}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("declare %v on node %s of cluster %s: %v", features, node, member, err)
	}
	if !slices.Equal(n.Status.DeclaredFeatures, features) {
		t.Fatalf("node %s of cluster %s declares %v after the patch, want %v", node, member, n.Status.DeclaredFeatures, features)
	}
}

// waitDeclares waits until the virtual node of cluster does, or does not,
// declare restartAllContainers.
func waitDeclares(t *testing.T, cluster string, want bool) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("virtual node %s to declare %s: %v", cluster, restartAllContainers, want), func(ctx context.Context) (bool, string, error) {
		n, err := hostClient().CoreV1().Nodes().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return slices.Contains(n.Status.DeclaredFeatures, restartAllContainers) == want, fmt.Sprint(n.Status.DeclaredFeatures), nil
	})
}

// waitUnschedulable waits until the host scheduler says pod ns/name cannot
// be placed, for a reason that contains why.
func waitUnschedulable(t *testing.T, ns, name, why string) {
	t.Helper()
	eventually(t, time.Minute, "pod "+name+" unschedulable in the host: "+why, func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if p.Spec.NodeName != "" {
			return false, "bound to " + p.Spec.NodeName, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, why), c.Message, nil
			}
		}
		return false, "no PodScheduled condition", nil
	})
}

// explainSays waits until kubectl flotilla explain pod/name says text.
func explainSays(t *testing.T, ns, name, text string) {
	t.Helper()
	var out string
	eventually(t, time.Minute, "kubectl flotilla explain pod/"+name+" to say "+text, func(ctx context.Context) (bool, string, error) {
		var err error
		out, err = env.KubectlFlotilla(ctx, "explain", "pod/"+name, "-n", ns)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.Contains(out, text), out, nil
	})
	t.Logf("kubectl flotilla explain pod/%s:\n%s", name, out)
}

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/poll"
	"flotilla.io/flotilla/test/testworld"
)

func hostClient() kubernetes.Interface { return env.World.Host().Client() }

func memberClient(name string) kubernetes.Interface { return env.World.Member(name).Client() }

// eventually waits for cond; see poll.Until.
var eventually = poll.Until

// goDark stops member cluster name's apiserver. back starts it again; if
// the test ends first, its cleanup does.
func goDark(t *testing.T, name string) (c *testworld.Cluster, back func()) {
	t.Helper()
	c = env.World.Member(name)
	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = c.StartAPIServer(context.Background())
		}
	})
	return c, func() {
		t.Helper()
		if err := c.StartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
		restarted = true
	}
}

// namespace creates a host namespace for one test and deletes it afterwards.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + "-" + fmt.Sprint(time.Now().UnixNano()%100000)
	_, err := hostClient().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = hostClient().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// virtualNodeToleration lets a pod onto flotilla's virtual nodes.
var virtualNodeToleration = corev1.Toleration{
	Key: wellknown.ProviderTaintKey, Operator: corev1.TolerationOpEqual, Value: wellknown.ProviderTaintValue,
	Effect: corev1.TaintEffectNoSchedule,
}

// deployment is a Deployment that tolerates the virtual nodes and spreads
// its pods evenly over them.
func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{virtualNodeToleration},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: wellknown.ClusterLabel, WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("100m"), corev1.ResourceMemory: mustQuantity("64Mi")},
					}}},
				},
			},
		},
	}
}

func podReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podstate.Ready(p)
}

// memberPodOf returns the member pod forwarded from a host pod, or nil.
func memberPodOf(ctx context.Context, host *corev1.Pod) (*corev1.Pod, error) {
	list, err := memberClient(host.Spec.NodeName).CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: wellknown.HostUIDLabel + "=" + string(host.UID),
	})
	if err != nil {
		return nil, err
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
		return &list.Items[0], nil
	}
	return nil, fmt.Errorf("host pod %s/%s has %d member pods", host.Namespace, host.Name, len(list.Items))
}

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/testworld"
)

// echoPort is the port the echo pod's server listens on, the Service's
// target port.
const echoPort = 8080

// TestGlobalServiceCarriesTraffic sends one real request through a global
// Service: from a node of beijing, whose kube-proxy programs beijing's
// mirror of the Service, to the only replica, which runs in hangzhou. The
// node and the replica's IP get a real network (testworld.Dataplane); the
// request reaches the replica only if beijing's mirror carries hangzhou's
// endpoint.
func TestGlobalServiceCarriesTraffic(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	hc := hostClient()
	if _, err := hc.AppsV1().Deployments(ns).Create(t.Context(), pinned(ns, "echo-hz", "echo", "hangzhou", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns, Annotations: map[string]string{wellknown.GlobalAnnotation: "true"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(echoPort)}}}}
	if _, err := hc.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	replica := echoReplica(t, ns)
	t.Logf("replica %s has IP %s in hangzhou", replica.Name, replica.Status.PodIP)
	bj := memberClient("beijing")
	var clusterIP string
	eventually(t, 2*time.Minute, "beijing's mirror of echo carries hangzhou's replica", func(ctx context.Context) (bool, string, error) {
		mirror, err := bj.CoreV1().Services(ns).Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		list, err := bj.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=echo"})
		if err != nil {
			return false, err.Error(), nil
		}
		if got := readyAddresses(list.Items); !slices.Contains(got, replica.Status.PodIP) {
			return false, fmt.Sprintf("ready endpoints %v", got), nil
		}
		clusterIP = mirror.Spec.ClusterIP
		return true, "", nil
	})

	dp := startDataplane(t, "beijing")
	if _, err := dp.AddPod(replica.Name, replica.Status.PodIP, echoPort); err != nil {
		t.Fatal(err)
	}
	url := "http://" + net.JoinHostPort(clusterIP, "80") + "/"
	began := time.Now()
	eventually(t, time.Minute, "a request from beijing's node to echo's ClusterIP reaches hangzhou's replica", func(ctx context.Context) (bool, string, error) {
		body, err := get(ctx, dp, url)
		if err != nil {
			return false, err.Error(), nil
		}
		if body != replica.Name {
			return false, fmt.Sprintf("answered %q, want %q", body, replica.Name), nil
		}
		return true, "", nil
	})
	t.Logf("GET %s from beijing node %s answered %q (%s)", url, dp.Node, replica.Name, time.Since(began).Round(time.Millisecond))

	// Without the annotation beijing, which runs none of echo's pods, loses
	// its mirror, and the same request no longer gets anywhere.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, wellknown.GlobalAnnotation)
	if _, err := hc.CoreV1().Services(ns).Patch(t.Context(), "echo", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	var failure error
	eventually(t, 2*time.Minute, "beijing's mirror of echo is gone and the request fails", func(ctx context.Context) (bool, string, error) {
		if _, err := bj.CoreV1().Services(ns).Get(ctx, "echo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("mirror still there (%v)", err), nil
		}
		body, err := get(ctx, dp, url)
		if err == nil {
			return false, fmt.Sprintf("request still answered %q", body), nil
		}
		failure = err
		return true, "", nil
	})
	t.Logf("without %s the same GET fails after %s: %v", wellknown.GlobalAnnotation, time.Since(began).Round(time.Millisecond), failure)
}

// echoReplica waits for echo's one replica to run in hangzhou and returns
// its member pod.
func echoReplica(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	var replica *corev1.Pod
	eventually(t, 2*time.Minute, "echo's replica runs in hangzhou", func(ctx context.Context) (bool, string, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil {
			return false, err.Error(), nil
		}
		if len(pods.Items) != 1 || !podReady(&pods.Items[0]) || pods.Items[0].Spec.NodeName != "hangzhou" {
			return false, fmt.Sprintf("%d host pods", len(pods.Items)), nil
		}
		p, err := memberPodOf(ctx, &pods.Items[0])
		if err != nil || p == nil || p.Status.PodIP == "" {
			return false, fmt.Sprintf("member pod %v (%v)", p, err), nil
		}
		replica = p
		return true, "", nil
	})
	return replica
}

// startDataplane gives the first node of member a real data plane until the
// test ends.
func startDataplane(t *testing.T, member string) *testworld.Dataplane {
	t.Helper()
	kubeProxy, err := testworld.KubeProxyOf(t.Context(), topology[member].version)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	dp, err := env.World.StartDataplane(t.Context(), testworld.DataplaneConfig{
		Cluster: member, Node: env.World.Member(member).NodeNames()[0], Number: 1, KubeProxy: kubeProxy,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dp.Stop(); err != nil {
			t.Errorf("stop data plane: %v", err)
		}
	})
	t.Logf("kube-proxy %s ready on node %s of %s in %s", topology[member].version, dp.Node, member, time.Since(began).Round(time.Millisecond))
	return dp
}

// get makes one GET from the data plane's node and returns the body of a
// 200 answer; a request that gets nowhere fails within seconds.
func get(ctx context.Context, dp *testworld.Dataplane, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := dp.HTTPClient().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), nil
}

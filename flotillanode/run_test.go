package flotillanode

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/kubeletauth"
	"flotilla.io/flotilla/provider"
)

type healthy struct{}

func (healthy) Healthy(context.Context) error { return nil }

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vn"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// waitClosed waits for ch with a deadline.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not within 30s", what)
	}
}

// TestRunReturnsOnlyWhenItsWritesAreDone runs an agent over fake host and
// member clusters, holds a pod's forwarding write to the member in flight
// and stops the agent: Run must not return (and so a standby taking over
// the Lease must not start) until that write has finished.
func TestRunReturnsOnlyWhenItsWritesAreDone(t *testing.T) {
	member := fake.NewClientset(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1"},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	})
	entered, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	member.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		close(entered)
		<-release
		finished.Store(true)
		return false, nil, nil // on to the tracker: the create succeeds
	})
	host := fake.NewClientset()
	reg := prometheus.NewRegistry()
	cfg := testConfig(t, host, member)
	cfg.Registerer = reg
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = a.Run(ctx) }()
	waitClosed(t, a.Ready(), "virtual node running")
	gauges := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		gauges[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
	}
	if gauges["flotilla_node_ready"] != 1 || gauges["flotilla_node_pods"] != 0 || gauges["flotilla_node_forward_backlog"] != 0 {
		t.Errorf("gauges of a running, empty virtual node = %v", gauges)
	}

	_, err = host.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec:       corev1.PodSpec{NodeName: "vn", Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, entered, "the pod's create reaching the member")

	cancel()
	// Run may not return while the write is in flight; give a wrong Run
	// ample time to do so.
	select {
	case <-a.Done():
		t.Fatal("Run returned while a write to the member was in flight")
	case <-time.After(2 * time.Second):
	}
	close(release)
	waitClosed(t, a.Done(), "Run returning once the write finished")
	if !finished.Load() {
		t.Error("Run returned before the write finished")
	}
	if err := a.Err(); err != nil {
		t.Errorf("Run() = %v after a plain stop, want nil", err)
	}
}

// testConfig is an agent's configuration for one whole-member virtual node
// "vn" between host and member, with small worker counts and a healthy
// member.
func testConfig(t *testing.T, host, member kube.Interface) Config {
	return Config{
		HostClient: host, MemberClient: member, Installation: "test",
		VirtualClusters: []v1alpha1.VirtualCluster{{Name: "vn", NamespaceMapping: v1alpha1.SameName}},
		NodeIP:          "127.0.0.1", BindAddress: "127.0.0.1", ServingCert: selfSigned(t),
		Auth: func(string) (kubeletauth.Auth, error) { return kubeletauth.AllowAll(), nil },
		Kubelet: func(_ v1alpha1.VirtualCluster, p *provider.Provider) (provider.KubeletAPI, error) {
			return provider.Kubelet{Provider: p}, nil
		},
		PodWorkers: 2, StatusWorkers: 2, HealthInterval: time.Second, FailureThreshold: 3,
		SyncTimeout: 10 * time.Second, Health: healthy{},
	}
}

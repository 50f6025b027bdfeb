package testworld_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"flotilla.io/flotilla/test/testworld"
)

func TestMain(m *testing.M) {
	// -short is the unit run: these tests need root and built binaries.
	flag.Parse()
	if testing.Short() {
		fmt.Println("testworld: skipped in -short mode")
		os.Exit(0)
	}
	os.Exit(testworld.RunInNetns(m.Run))
}

// binaries builds or finds the binaries once per test, outside the timing
// of the start itself.
func binaries(tb testing.TB) *testworld.Bin {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	bin, err := testworld.Binaries(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return &bin
}

func membersConfig(n, nodes int) []testworld.ClusterConfig {
	var members []testworld.ClusterConfig
	for i := 1; i <= n; i++ {
		m := testworld.ClusterConfig{Name: fmt.Sprintf("member-%d", i)}
		for j := 1; j <= nodes; j++ {
			m.Nodes = append(m.Nodes, testworld.NodeSpec{
				Name:   fmt.Sprintf("m%d-node-%d", i, j),
				Labels: map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", j)},
			})
		}
		members = append(members, m)
	}
	return members
}

func TestWorld(t *testing.T) {
	bin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	members := membersConfig(2, 2)
	members[0].Nodes[0].Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	began := time.Now()
	w, err := testworld.Start(ctx, testworld.Config{Members: members, Bin: bin, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warm start of host + 2 members (2 fake nodes each): %.1fs", time.Since(began).Seconds())
	t.Cleanup(func() {
		if err := w.Stop(); err != nil {
			t.Error(err)
		}
	})

	if got := len(w.Members()); got != 2 {
		t.Fatalf("Members() = %d clusters, want 2", got)
	}
	if w.Member("nope") != nil {
		t.Error(`Member("nope") is not nil`)
	}
	if n := w.Host().Process(testworld.ComponentKwok); n != nil {
		t.Error("the host runs kwok though it has no fake nodes")
	}

	t.Run("nodes ready", func(t *testing.T) {
		for _, m := range w.Members() {
			nodes, err := m.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) != 2 {
				t.Errorf("%s has %d nodes, want 2", m.Name, len(nodes.Items))
			}
			for _, n := range nodes.Items {
				if !ready(n.Status.Conditions) {
					t.Errorf("%s: node %s is not Ready", m.Name, n.Name)
				}
				if n.Labels["type"] != "kwok" || n.Labels["topology.kubernetes.io/zone"] == "" {
					t.Errorf("%s: node %s labels = %v", m.Name, n.Name, n.Labels)
				}
				if got := internalIP(n); got != testworld.AdvertiseIP {
					t.Errorf("%s: node %s InternalIP = %q, want %s", m.Name, n.Name, got, testworld.AdvertiseIP)
				}
			}
		}
		n, err := w.Member("member-1").Client().CoreV1().Nodes().Get(ctx, "m1-node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cpu := n.Status.Allocatable.Cpu(); cpu.Cmp(resource.MustParse("4")) != 0 {
			t.Errorf("m1-node-1 allocatable cpu = %s, want 4", cpu)
		}
		if mem := n.Status.Allocatable.Memory(); mem.Cmp(resource.MustParse("256Gi")) != 0 {
			t.Errorf("m1-node-1 allocatable memory = %s, want the default 256Gi", mem)
		}
	})

	t.Run("pod runs with an IP from its cluster's CIDR", func(t *testing.T) {
		for _, m := range w.Members() {
			ip := runPod(ctx, t, m.Client(), "web")
			_, cidr, err := net.ParseCIDR(m.PodCIDR)
			if err != nil {
				t.Fatal(err)
			}
			if !cidr.Contains(net.ParseIP(ip)) {
				t.Errorf("%s: pod IP %s is not in %s", m.Name, ip, m.PodCIDR)
			}
			deletePod(ctx, t, m.Client(), "web")
		}
	})

	t.Run("user without RBAC is forbidden", func(t *testing.T) {
		m := w.Member("member-2")
		path, err := m.UserKubeconfig("alice", "flotilla:testers")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("listing pods as alice: err = %v, want 403 Forbidden", err)
		}
	})

	t.Run("apiserver stops and comes back on the same port", func(t *testing.T) {
		m := w.Member("member-2")
		server := m.Server()
		if err := m.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
		_, err := m.Client().CoreV1().Namespaces().Get(short, "default", metav1.GetOptions{})
		cancelShort()
		if err == nil {
			t.Fatal("the apiserver answered while stopped")
		}
		if err := m.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if m.Server() != server {
			t.Errorf("server moved from %s to %s", server, m.Server())
		}
		if _, err := m.Client().CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Fatalf("after restart: %v", err)
		}
	})

	t.Run("extra process", func(t *testing.T) {
		p, err := w.StartProcess("sleeper", "/bin/sleep", "600")
		if err != nil {
			t.Fatal(err)
		}
		if p.Pid() <= 0 {
			t.Errorf("Pid() = %d", p.Pid())
		}
		if exited, _ := p.Exited(); exited {
			t.Fatalf("sleeper exited early:\n%s", p.LogTail(10))
		}
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		if exited, _ := p.Exited(); !exited {
			t.Error("sleeper still running after Stop")
		}
	})
}

// runPod creates a pod and waits until it is Running, returning its IP.
func runPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.invalid/web:1"}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase == corev1.PodRunning && got.Status.PodIP != "" {
			return got.Status.PodIP
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not Running after a minute: phase %s, node %q", name, got.Status.Phase, got.Spec.NodeName)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deletePod deletes a pod and waits until kwok has finished it off.
func deletePod(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if err := cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still there a minute after its deletion", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func internalIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

func ready(conds []corev1.NodeCondition) bool {
	for _, c := range conds {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// BenchmarkStart measures the warm start of a host and three members with
// two fake nodes each, the world the e2e tests use:
//
//	go test ./internal/testworld/ -run '^$' -bench Start -benchtime 3x
func BenchmarkStart(b *testing.B) {
	bin := binaries(b)
	for b.Loop() {
		w, err := testworld.Start(context.Background(), testworld.Config{Members: membersConfig(3, 2), Bin: bin})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := w.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// TestSiteCallsOutOnly: a site reaches the world's listeners through its
// gateway, and the connection works both ways; the world cannot open a
// connection to the site, neither to the address its processes advertise
// (no route) nor to its end of the link (refused by its firewall).
func TestSiteCallsOutOnly(t *testing.T) {
	site, err := testworld.NewSite("edge", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := site.Close(); err != nil {
			t.Error(err)
		}
	})

	world, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	port := world.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := site.DialContext(ctx, "tcp", net.JoinHostPort(site.Gateway, fmt.Sprint(port)))
	if err != nil {
		t.Fatalf("the site cannot reach the world at %s: %v", site.Gateway, err)
	}
	defer out.Close()
	in, err := world.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if got := in.RemoteAddr().(*net.TCPAddr).IP.String(); got != site.LinkAddr {
		t.Errorf("the site's connection comes from %s, want %s", got, site.LinkAddr)
	}
	exchange := func(from, to net.Conn, what string) {
		t.Helper()
		_ = to.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := from.Write([]byte(what)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(what))
		if _, err := io.ReadFull(to, buf); err != nil || string(buf) != what {
			t.Fatalf("sent %q, got %q: %v", what, buf, err)
		}
	}
	exchange(out, in, "site to world")
	exchange(in, out, "world to site")

	inside, err := site.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inside.Close()
	sitePort := fmt.Sprint(inside.Addr().(*net.TCPAddr).Port)
	for _, addr := range []string{site.Addr, site.LinkAddr} {
		d := net.Dialer{Timeout: 3 * time.Second}
		if c, err := d.DialContext(t.Context(), "tcp", net.JoinHostPort(addr, sitePort)); err == nil {
			c.Close()
			t.Errorf("the world opened a connection to the site at %s", addr)
		} else {
			t.Logf("world to site at %s: %v", addr, err)
		}
	}
	// The site's own listener works, from inside.
	c, err := site.DialContext(ctx, "tcp", net.JoinHostPort(site.Addr, sitePort))
	if err != nil {
		t.Fatalf("the site cannot reach its own listener: %v", err)
	}
	c.Close()
}

// TestMemberBehindNAT: a member behind NAT runs in its own site. Its fake
// nodes come up and advertise the site's address; it reaches the host's
// apiserver at its gateway, with a certificate valid for that address; the
// host's network cannot reach the member's apiserver at all.
func TestMemberBehindNAT(t *testing.T) {
	bin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w, err := testworld.Start(ctx, testworld.Config{Bin: bin, Logf: t.Logf, Members: []testworld.ClusterConfig{
		{Name: "edge", BehindNAT: true, Nodes: []testworld.NodeSpec{{Name: "edge-node-1"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Stop(); err != nil {
			t.Error(err)
		}
	})
	edge := w.Member("edge")
	site := edge.Site()
	if site == nil {
		t.Fatal("the member behind NAT has no site")
	}
	nodes, err := edge.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 || !ready(nodes.Items[0].Status.Conditions) || internalIP(nodes.Items[0]) != site.Addr {
		t.Errorf("edge's nodes: %+v", nodes.Items)
	}

	// The member reaches the host, as a pull-mode flotilla-node would.
	u, err := url.Parse(w.Host().Server())
	if err != nil {
		t.Fatal(err)
	}
	hostFromSite := w.Host().RESTConfig()
	hostFromSite.Host = "https://" + net.JoinHostPort(site.Gateway, u.Port())
	hostFromSite.Dial = site.DialContext
	hc, err := kubernetes.NewForConfig(hostFromSite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		t.Errorf("the host's apiserver from edge's site, at %s: %v", hostFromSite.Host, err)
	}

	// The host cannot reach the member: not at the address it advertises,
	// not at its end of the link, not at the world's own loopback.
	m, err := url.Parse(edge.Server())
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{site.Addr, site.LinkAddr, "127.0.0.1"} {
		d := net.Dialer{Timeout: 3 * time.Second}
		if c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addr, m.Port())); err == nil {
			c.Close()
			t.Errorf("the host's network reached edge's apiserver port at %s", addr)
		}
	}
}

// TestKonnectivity: with the apiserver-network-proxy, the host apiserver
// reaches an address of a site behind NAT through that site's agent, and
// an address of its own network through the default-route agent: a
// Service proxied by the host to a listener in each answers with that
// listener's words. The proxy's frontend, which serves the host apiserver
// with a certificate of the host CA, opens no tunnel for anyone else: not
// for the host's admin certificate, not without a certificate.
func TestKonnectivity(t *testing.T) {
	bin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w, err := testworld.Start(ctx, testworld.Config{Bin: bin, Logf: t.Logf, Konnectivity: true, Members: []testworld.ClusterConfig{
		{Name: "edge", BehindNAT: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Stop(); err != nil {
			t.Error(err)
		}
	})
	up := time.Now()
	site := w.Member("edge").Site()
	inSite, err := site.Listen("tcp", net.JoinHostPort(site.Addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	inWorld, err := net.Listen("tcp", net.JoinHostPort(testworld.AdvertiseIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	for l, words := range map[net.Listener]string{inSite: "from the site", inWorld: "from the world"} {
		srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprint(rw, words) })}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Close() })
	}
	host := w.Host().Client()
	for name, l := range map[string]net.Listener{"in-site": inSite, "in-world": inWorld} {
		addr := l.Addr().(*net.TCPAddr)
		if _, err := host.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The service proxy goes only to the address of a pod: one that
		// stands for the listener.
		pod, err := host.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.PodSpec{NodeName: "nowhere", Containers: []corev1.Container{{Name: "c", Image: "c"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.PodIP = addr.IP.String()
		pod.Status.PodIPs = []corev1.PodIP{{IP: addr.IP.String()}}
		if _, err := host.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The apiserver's service proxy reads Endpoints, not EndpointSlices.
		if _, err := host.CoreV1().Endpoints("default").Create(ctx, &corev1.Endpoints{ //nolint:staticcheck
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck
				Addresses: []corev1.EndpointAddress{{IP: addr.IP.String(),
					TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: name, UID: pod.UID}}},
				Ports: []corev1.EndpointPort{{Name: "http", Port: int32(addr.Port)}}, //nolint:staticcheck
			}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{"in-site": "from the site", "in-world": "from the world"} {
		var got []byte
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, last = host.CoreV1().Services("default").ProxyGet("http", name, "http", "/", nil).DoRaw(ctx)
			return last == nil, nil
		})
		if err != nil || string(got) != want {
			t.Errorf("service %s through the host apiserver: %q, %v (last: %v); want %q", name, got, err, last, want)
		}
		t.Logf("service %s answered %q through the host apiserver, %s after the world was up", name, got, time.Since(up).Round(time.Millisecond))
	}

	// The strongest certificate of the host, and none at all.
	admin := w.Host().RESTConfig()
	adminCert, err := tls.X509KeyPair(admin.CertData, admin.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	hostCA := x509.NewCertPool()
	if !hostCA.AppendCertsFromPEM(admin.CAData) {
		t.Fatal("no host CA in the admin's REST config")
	}
	proxy, err := url.Parse(w.Konnectivity().ProxyURL)
	if err != nil {
		t.Fatal(err)
	}
	target := inSite.Addr().String()
	for name, cert := range map[string]*tls.Certificate{"the host admin's certificate": &adminCert, "no certificate": {}} {
		// Sent whatever CAs the server names as acceptable.
		send := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
		d := tls.Dialer{Config: &tls.Config{RootCAs: hostCA, GetClientCertificate: send}}
		conn, err := d.DialContext(ctx, "tcp", proxy.Host)
		var unverified *tls.CertificateVerificationError
		if errors.As(err, &unverified) {
			t.Fatalf("the frontend's serving certificate, checked against the host CA: %v", err)
		} else if err != nil {
			t.Errorf("dial the frontend with %s: %v", name, err)
			continue
		}
		// TLS 1.3: the server checks the client's certificate after the
		// client's side of the handshake is done; its refusal comes with
		// the first read.
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		switch {
		case err == nil:
			t.Errorf("the frontend answered CONNECT with %s: %s", name, resp.Status)
		case !strings.Contains(err.Error(), "certificate"):
			t.Errorf("the frontend with %s failed, but not for the certificate: %v", name, err)
		default:
			t.Logf("frontend with %s: %v", name, err)
		}
	}
}

// TestWorldOfVersions starts clusters of different Kubernetes versions, one
// with a feature gate on, and checks that each runs the version and gate it
// was given.
func TestWorldOfVersions(t *testing.T) {
	bin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// A gate that is off by default in every supported version.
	const gate = "ConcurrentWatchObjectDecode"
	w, err := testworld.Start(ctx, testworld.Config{Bin: bin, Logf: t.Logf,
		KubernetesVersion: testworld.Kubernetes136,
		FeatureGates:      map[string]bool{gate: true},
		Members: []testworld.ClusterConfig{
			{Name: "oldest", KubernetesVersion: testworld.Kubernetes134},
			{Name: "default"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Stop(); err != nil {
			t.Error(err)
		}
	})
	want := map[string]string{
		testworld.HostName: testworld.Kubernetes136,
		"oldest":           testworld.Kubernetes134,
		"default":          bin.KubernetesVersion,
	}
	for _, c := range w.Clusters() {
		v, err := c.Client().Discovery().ServerVersion()
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if v.GitVersion != want[c.Name] || c.KubernetesVersion() != want[c.Name] {
			t.Errorf("%s serves %s (binaries of %s), want %s", c.Name, v.GitVersion, c.KubernetesVersion(), want[c.Name])
		}
	}
	// The apiserver reports each gate's state in its metrics.
	for _, c := range []*testworld.Cluster{w.Host(), w.Member("oldest")} {
		raw, err := c.Client().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatalf("%s metrics: %v", c.Name, err)
		}
		on := regexp.MustCompile(`kubernetes_feature_enabled\{name="` + gate + `",stage="[A-Z]*"\} 1`).Match(raw)
		if wantOn := c.Name == testworld.HostName; on != wantOn {
			t.Errorf("%s: %s enabled = %t, want %t", c.Name, gate, on, wantOn)
		}
	}
}

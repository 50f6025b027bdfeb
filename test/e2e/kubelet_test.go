package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/streaming"
	"flotilla.io/flotilla/test/testworld"
)

// These tests use the kubelet API of virtual nodes the way users do, through
// the host apiserver (kubectl logs, exec, attach, port-forward, top), and
// check what reaches the bytes kwok serves in the member: log files the test
// writes, commands kwok runs, a TCP server the test runs, usage kwok
// simulates from pod annotations.

// The tests run in parallel with each other (and after every sequential
// test), on members chosen so that no two of them write the same log file:
// kwok serves one per member and container name.
const (
	logsMember   = "hangzhou" // TestKubectlLogs: app, sidecar
	attachMember = "beijing"  // TestKubectlAttach: sidecar; TestKubeletAPIAuth: app
	topMember    = "beijing"  // TestKubectlTop: writes no logs; never goes dark
)

// kubectl runs the test world's kubectl against the host as admin.
func kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	return env.World.Kubectl(ctx, stdin, args...)
}

// TestKubectlTop runs metrics-server in the host and in a member, and reads
// a forwarded pod's and its virtual node's usage in the host as kwok
// simulates it in the member, and the virtual node's /stats/summary through
// the host apiserver. It comes first and sets up before pausing for the
// sequential tests: usage takes most of a minute to flow from kwok through
// two metrics-servers, and by the time the test resumes it has.
func TestKubectlTop(t *testing.T) {
	const member = topMember
	ctx := t.Context()
	if err := env.World.StartMetricsServers(ctx, testworld.HostName, member); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	usage := map[string]string{"kwok.x-k8s.io/usage-cpu": "250m", "kwok.x-k8s.io/usage-memory": "100Mi"}
	pod := streamingPod(t, ns, "busy", member, usage)
	// Which member pods count as the virtual node's (only those it
	// forwarded) is left to the unit tests: a pod created in the member
	// would change the virtual node's pod capacity, which sequential tests
	// check while this one is paused.

	t.Parallel()

	// Member metrics-server needs three scrapes (kwok's first counter is
	// zero), the host's two more.
	const timeout = 2 * time.Minute
	t.Run("top pod", func(t *testing.T) {
		eventually(t, timeout, "kubectl top pod to show the forwarded pod", func(ctx context.Context) (bool, string, error) {
			ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			out, err := kubectl(ctx, nil, "top", "pod", "-n", ns, "--no-headers", "--containers", "--request-timeout=10s")
			if err != nil {
				return false, err.Error(), nil
			}
			cpu := map[string]resource.Quantity{}
			mem := map[string]resource.Quantity{}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(l) // POD NAME CPU MEMORY
				if len(f) != 4 || f[0] != pod.Name {
					continue
				}
				c, cerr := resource.ParseQuantity(f[2])
				m, merr := resource.ParseQuantity(f[3])
				if cerr == nil && merr == nil {
					cpu[f[1]], mem[f[1]] = c, m
				}
			}
			if len(cpu) < 2 {
				return false, out, nil
			}
			// kwok simulates 250m and 100Mi per container (the pod's
			// annotations); rates are rounded over the scrape windows.
			for _, c := range []string{"app", "sidecar"} {
				if c, m := cpu[c], mem[c]; c.MilliValue() < 200 || c.MilliValue() > 300 || m.Cmp(resource.MustParse("100Mi")) != 0 {
					return false, out, nil
				}
			}
			return true, "", nil
		})
	})
	t.Run("top node", func(t *testing.T) {
		eventually(t, timeout, "kubectl top node to show the virtual node", func(ctx context.Context) (bool, string, error) {
			ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			out, err := kubectl(ctx, nil, "top", "node", member, "--no-headers", "--request-timeout=10s")
			if err != nil {
				return false, err.Error(), nil
			}
			f := strings.Fields(out) // NAME CPU CPU% MEMORY MEMORY%
			if len(f) < 4 || f[0] != member {
				return false, out, nil
			}
			// Two containers at 250m and 100Mi each, plus whatever else
			// runs on the member's nodes: the node is the sum of them.
			cpu, cerr := resource.ParseQuantity(f[1]) // <unknown> until scraped twice
			mem, merr := resource.ParseQuantity(f[3])
			if cerr != nil || merr != nil || cpu.MilliValue() < 500 || mem.Cmp(resource.MustParse("200Mi")) < 0 {
				return false, out, nil
			}
			return true, "", nil
		})
	})
	t.Run("stats summary", func(t *testing.T) {
		var summary statsv1alpha1.Summary
		raw, err := hostClient().CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", member, "proxy/stats/summary").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &summary); err != nil {
			t.Fatal(err)
		}
		if summary.Node.NodeName != member || summary.Node.CPU == nil || ptr.Deref(summary.Node.CPU.UsageCoreNanoSeconds, 0) == 0 {
			t.Errorf("node stats = %+v, want %s with CPU time", summary.Node, member)
		}
		var found bool
		for _, p := range summary.Pods {
			if p.PodRef.Namespace == ns && p.PodRef.Name == pod.Name {
				found = true
				if p.PodRef.UID != string(pod.UID) || len(p.Containers) != 2 || p.Memory == nil || ptr.Deref(p.Memory.WorkingSetBytes, 0) != 200<<20 {
					t.Errorf("stats of %s = %+v, want host UID %s, 2 containers, 200Mi", pod.Name, p, pod.UID)
				}
			}
		}
		if !found {
			t.Errorf("stats summary has no pod %s/%s: %s", ns, pod.Name, raw)
		}
	})
}

// streamingPod creates a pod with containers "app" and "sidecar" (the names
// kwok gives log files of their own) on member and waits until it runs.
func streamingPod(t *testing.T, ns, name, member string, annotations map[string]string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{wellknown.ClusterLabel: member},
			Tolerations:                   []corev1.Toleration{virtualNodeToleration},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{
				{Name: "app", Image: "busybox:1.36"},
				{Name: "sidecar", Image: "busybox:1.36"},
			},
		},
	}
	if _, err := hostClient().CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	return waitPodReady(t, ns, name)
}

// TestKubectlLogs reads a forwarded pod's logs through its virtual node with
// the options users pass, against log lines the test wrote in the member.
func TestKubectlLogs(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	pod := streamingPod(t, ns, "logs", logsMember, nil)
	member := env.World.Member(logsMember)
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	now := time.Now().Truncate(time.Millisecond)
	old := now.Add(-2 * time.Hour)
	write := func(container string, previous bool, at time.Time, line string) {
		t.Helper()
		if err := member.AppendKwokLog(container, previous, at, line); err != nil {
			t.Fatal(err)
		}
	}
	write("app", false, old, "app old "+id)
	for i := 1; i <= 3; i++ {
		write("app", false, now.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("app line %d %s", i, id))
	}
	write("sidecar", false, now, "sidecar line "+id)
	write("app", true, old, "app previous "+id)
	logs := func(args ...string) string {
		t.Helper()
		out, err := kubectl(t.Context(), nil, append([]string{"logs", "-n", ns, pod.Name}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	t.Run("tail", func(t *testing.T) {
		if got, want := logs("-c", "app", "--tail=2"), fmt.Sprintf("app line 2 %s\napp line 3 %s\n", id, id); got != want {
			t.Errorf("logs --tail=2 = %q, want %q", got, want)
		}
	})
	t.Run("timestamps", func(t *testing.T) {
		got := logs("-c", "app", "--tail=1", "--timestamps")
		stamp, line, _ := strings.Cut(got, " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil || !at.Equal(now.Add(3*time.Millisecond)) || line != "app line 3 "+id+"\n" {
			t.Errorf("logs --timestamps = %q, want the time line 3 was written at (%s) before it", got, now.Add(3*time.Millisecond).UTC().Format(time.RFC3339Nano))
		}
	})
	t.Run("since", func(t *testing.T) {
		got := logs("-c", "app", "--since=1h")
		if strings.Contains(got, "app old "+id) || !strings.Contains(got, "app line 1 "+id) {
			t.Errorf("logs --since=1h = %q, want the recent lines only", got)
		}
		got = logs("-c", "app", "--since-time="+now.Add(-time.Minute).UTC().Format(time.RFC3339))
		if strings.Contains(got, "app old "+id) || !strings.Contains(got, "app line 3 "+id) {
			t.Errorf("logs --since-time = %q, want the recent lines only", got)
		}
	})
	t.Run("container", func(t *testing.T) {
		if got, want := logs("-c", "sidecar"), "sidecar line "+id+"\n"; got != want {
			t.Errorf("logs -c sidecar = %q, want %q", got, want)
		}
	})
	t.Run("previous", func(t *testing.T) {
		if got, want := logs("-c", "app", "--previous"), "app previous "+id+"\n"; got != want {
			t.Errorf("logs --previous = %q, want %q", got, want)
		}
	})
	t.Run("follow", func(t *testing.T) {
		out := streaming.Kubectl(t, env.World, "logs", "-n", ns, pod.Name, "-c", "app", "-f", "--tail=1")
		n := 0
		// A line written before the stream reached the end of the file is
		// not new to it; keep writing until one comes through.
		eventually(t, 30*time.Second, "a line written after kubectl logs -f started", func(context.Context) (bool, string, error) {
			if regexp.MustCompile(`follow \d+ ` + id).MatchString(out.String()) {
				return true, "", nil
			}
			n++
			write("app", false, time.Now(), fmt.Sprintf("follow %d %s", n, id))
			return false, out.String(), nil
		})
	})
}

// TestKubectlExec runs commands in a forwarded pod: stdin reaches the
// command, its exit code reaches kubectl, and a TTY has the size the client
// asked for.
func TestKubectlExec(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	pod := streamingPod(t, ns, "exec", logsMember, nil)
	t.Run("stdin", func(t *testing.T) {
		line := "hello through the virtual node " + strconv.FormatInt(time.Now().UnixNano(), 36)
		out, err := kubectl(t.Context(), strings.NewReader(line+"\n"), "exec", "-i", "-n", ns, pod.Name, "-c", "app", "--", "head", "-n", "1")
		if err != nil {
			t.Fatal(err)
		}
		if out != line+"\n" {
			t.Errorf("exec -i head -n 1 = %q, want %q", out, line+"\n")
		}
	})
	t.Run("failure", func(t *testing.T) {
		// The command leaves a trace on this machine, where kwok runs it.
		trace := fmt.Sprintf("/tmp/flotilla-e2e-exec-%d", time.Now().UnixNano())
		t.Cleanup(func() { os.Remove(trace) })
		_, err := kubectl(t.Context(), nil, "exec", "-n", ns, pod.Name, "-c", "app", "--", "sh", "-c", "echo ran >> "+trace+"; exit 3")
		// kwok reports a failed command as an error naming its exit status
		// rather than as an exit code, so kubectl exits with 1, not 3.
		if err == nil || !strings.Contains(err.Error(), "exit status 3") {
			t.Errorf("exec sh -c 'exit 3': err = %v, want the command's exit status 3", err)
		}
		if b, err := os.ReadFile(trace); err != nil || string(b) != "ran\n" {
			t.Errorf("the failing command left %q (%v), want it run exactly once", b, err)
		}
	})
	t.Run("tty", func(t *testing.T) {
		out, err := streaming.ExecTTY(t.Context(), env.World, ns, pod.Name, "app", 77, 33)
		if err != nil {
			t.Fatalf("exec with a TTY: %v (output %q)", err, out)
		}
		if got := out; !strings.Contains(got, "33 77") || !strings.Contains(got, "tty") {
			t.Errorf("exec with a 77x33 TTY printed %q, want the size 33 77 and tty", got)
		}
	})
}

// TestKubectlAttach attaches to a forwarded pod's container and sees what
// it writes from then on.
func TestKubectlAttach(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	pod := streamingPod(t, ns, "attach", attachMember, nil)
	member := env.World.Member(attachMember)
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	out := streaming.Kubectl(t, env.World, "attach", "-n", ns, pod.Name, "-c", "sidecar")
	n := 0
	eventually(t, 30*time.Second, "output written after kubectl attach started", func(context.Context) (bool, string, error) {
		if regexp.MustCompile(`attached \d+ ` + id).MatchString(out.String()) {
			return true, "", nil
		}
		n++
		if err := member.AppendKwokLog("sidecar", false, time.Now(), fmt.Sprintf("attached %d %s", n, id)); err != nil {
			return false, "", err
		}
		return false, out.String(), nil
	})
}

// TestKubectlPortForward forwards a local port to a forwarded pod and
// round-trips bytes with the server kwok sends the pod's port to.
func TestKubectlPortForward(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	pod := streamingPod(t, ns, "portforward", logsMember, nil)
	local := streaming.PortForward(t, env.World, ns, pod.Name)
	streaming.EchoTwice(t, local, logsMember)
}

// TestKubeletAPIAuth calls a virtual node's kubelet endpoint directly: it
// presents a certificate from the host CA for the node's address, refuses
// callers it cannot authenticate (401) and those the host does not allow
// nodes/proxy (403), and serves those it does. And the host apiserver only
// talks to kubelet endpoints with such a certificate.
func TestKubeletAPIAuth(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	pod := streamingPod(t, ns, "auth", attachMember, nil)
	line := "auth " + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := env.World.Member(attachMember).AppendKwokLog("app", false, time.Now(), line); err != nil {
		t.Fatal(err)
	}
	base := "https://" + net.JoinHostPort(testworld.AdvertiseIP, strconv.Itoa(env.KubeletPort(attachMember)))
	execURL := base + "/exec/" + ns + "/" + pod.Name + "/app?command=true&output=1"
	logsURL := base + "/containerLogs/" + ns + "/" + pod.Name + "/app?tailLines=1"

	hostCA, err := os.ReadFile(env.World.Host().CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(hostCA)
	client := func(user string, groups ...string) *http.Client {
		t.Helper()
		tc := &tls.Config{RootCAs: roots}
		if user != "" {
			path, err := env.World.Host().UserKubeconfig(user, groups...)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatal(err)
			}
			pair, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	}
	call := func(c *http.Client, method, url, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// Fails unless the serving certificate is the host CA's for the
		// node's address.
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	anonymous := client("")
	if code, _ := call(anonymous, http.MethodPost, execURL, ""); code != http.StatusUnauthorized {
		t.Errorf("exec without credentials: status %d, want 401", code)
	}
	if code, _ := call(anonymous, http.MethodPost, execURL, "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("exec with an invalid token: status %d, want 401", code)
	}
	nobody := client("e2e:no-node-permissions")
	if code, _ := call(nobody, http.MethodPost, execURL, ""); code != http.StatusForbidden {
		t.Errorf("exec by a user without nodes/proxy: status %d, want 403", code)
	}
	if code, _ := call(nobody, http.MethodGet, logsURL, ""); code != http.StatusForbidden {
		t.Errorf("logs by a user without nodes/proxy: status %d, want 403", code)
	}
	if code, _ := call(nobody, http.MethodGet, base+"/metrics/resource", ""); code != http.StatusForbidden {
		t.Errorf("resource metrics for a user without nodes/metrics: status %d, want 403", code)
	}
	admin := client("e2e:admin", "system:masters")
	if code, body := call(admin, http.MethodGet, logsURL, ""); code != http.StatusOK || body != line+"\n" {
		t.Errorf("logs by an admin: status %d body %q, want 200 %q", code, body, line+"\n")
	}

	// The other way round: the host apiserver refuses a kubelet endpoint
	// whose certificate the host CA did not issue.
	impostor := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "served by an impostor")
	}))
	impostor.Listener.Close()
	if impostor.Listener, err = net.Listen("tcp", net.JoinHostPort(testworld.AdvertiseIP, "0")); err != nil {
		t.Fatal(err)
	}
	impostor.StartTLS()
	t.Cleanup(impostor.Close)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-impostor"},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "e2e/impostor", Effect: corev1.TaintEffectNoSchedule}}},
	}
	node, err = hostClient().CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = hostClient().CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := hostClient().CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: testworld.AdvertiseIP}}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(impostor.Listener.Addr().(*net.TCPAddr).Port)
		_, err = hostClient().CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := hostClient().CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node.Name, "proxy/healthz").DoRaw(t.Context())
	if err == nil || strings.Contains(string(body), "impostor") {
		t.Errorf("the host apiserver proxied to a kubelet with an unknown certificate: %q, %v", body, err)
	}
}

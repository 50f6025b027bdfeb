// Package pull_test runs flotilla with a member behind NAT (pull mode):
// its flotilla-node runs in the member's own network, only dialing out to
// the host, and the host apiserver reaches its kubelet endpoint through
// Konnectivity. A second member, reached directly (push mode), shares the
// world.
package pull_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/plugin"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// The members: near is reached directly, far only dials out.
const (
	near = "near"
	far  = "far"
)

var env *fleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("pull: skipped in -short mode")
		os.Exit(0)
	}
	if !testworld.InNetns() {
		if err := fleet.Prepare(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "pull:", err)
			os.Exit(1)
		}
	}
	os.Exit(testworld.RunInNetns(func() int { return run(m) }))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Printf("pull: "+format+"\n", args...) }
	// The host runs an older Kubernetes than both members: the other
	// direction of skew from test/e2e's world.
	w, err := testworld.Start(ctx, testworld.Config{Logf: logf, Konnectivity: true, KeepDir: os.Getenv("FLOTILLA_E2E_KEEP") != "",
		KubernetesVersion: testworld.Kubernetes135,
		Members: []testworld.ClusterConfig{
			{Name: near, KubernetesVersion: testworld.Kubernetes137, Nodes: []testworld.NodeSpec{{Name: near + "-node-1"}}},
			{Name: far, KubernetesVersion: testworld.Kubernetes136, BehindNAT: true, Nodes: []testworld.NodeSpec{{Name: far + "-node-1"}}},
		}})
	if err != nil {
		logf("start test world: %v", err)
		return 1
	}
	defer w.Stop()
	bin, err := fleet.BuildNode(ctx, w.Dir())
	if err != nil {
		logf("%v", err)
		return 1
	}
	started := time.Now()
	// The kubelet API is probed every second so that a tunnel down shows
	// on the virtual node within a few.
	if env, err = fleet.Deploy(ctx, w, bin, "--log-level=debug", "--kubelet-api-probe-interval=1s"); err != nil {
		logf("deploy flotilla: %v", err)
		return 1
	}
	logf("flotilla-node in %s (push) and in %s (pull) Ready in %s", near, far, time.Since(started).Round(time.Millisecond))
	code := m.Run()
	if code != 0 {
		w.KeepFiles()
		logf("tests failed: the world's logs stay in %s (a run a day later removes them)", w.Dir())
	}
	return code
}

// virtualNodeToleration lets a pod onto flotilla's virtual nodes.
var virtualNodeToleration = corev1.Toleration{Key: wellknown.ProviderTaintKey, Operator: corev1.TolerationOpEqual,
	Value: wellknown.ProviderTaintValue, Effect: corev1.TaintEffectNoSchedule}

// spreadDeployment is a Deployment of replicas pods (container "app",
// nginx:1.27) labelled app=name, allowed on the virtual nodes of clusters
// only and spread evenly over them.
func spreadDeployment(name string, replicas int32, clusters ...string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{virtualNodeToleration},
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: clusters}},
						}}},
					}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: wellknown.ClusterLabel, WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
				},
			},
		},
	}
}

// runOn creates a pod placed on member's virtual node and waits until it
// runs there.
func runOn(t *testing.T, ns, name, member string) *corev1.Pod {
	t.Helper()
	host := env.World.Host().Client()
	if _, err := host.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{wellknown.ClusterLabel: member},
			Tolerations:                   []corev1.Toleration{virtualNodeToleration},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "app", Image: "busybox:1.36"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	var last string
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := host.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pod, last = p, fmt.Sprintf("%s on %q", p.Status.Phase, p.Spec.NodeName)
		return p.Spec.NodeName == member && podstate.Ready(p), nil
	}); err != nil {
		t.Fatalf("%s Running in %s: %v (last: %s)", name, member, err, last)
	}
	return pod
}

func kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	return env.World.Kubectl(ctx, stdin, args...)
}

// namespace creates host namespace name for a test.
func namespace(t *testing.T, name string) string {
	t.Helper()
	if _, err := env.World.Host().Client().CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestPullMember: a pod placed on the member behind NAT runs there, and
// kubectl logs and exec (with stdin) reach it through the host apiserver,
// as they reach the pod of the member in the host's network, though
// nothing in the host's network can open a connection to that member's
// kubelet endpoint.
func TestPullMember(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "pull-member")
	for _, member := range []string{near, far} {
		runOn(t, ns, "app-"+member, member)
	}

	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, member := range []string{near, far} {
		if err := env.World.Member(member).AppendKwokLog("app", false, time.Now(), "hello from "+member+" "+id); err != nil {
			t.Fatal(err)
		}
		out, err := kubectl(ctx, nil, "logs", "-n", ns, "app-"+member, "--tail=1")
		if err != nil || out != "hello from "+member+" "+id+"\n" {
			t.Errorf("kubectl logs of the pod in %s: %q, %v", member, out, err)
		}
		line := "through the tunnel to " + member + " " + id
		out, err = kubectl(ctx, strings.NewReader(line+"\n"), "exec", "-i", "-n", ns, "app-"+member, "--", "head", "-n", "1")
		if err != nil || out != line+"\n" {
			t.Errorf("kubectl exec -i of the pod in %s: %q, %v", member, out, err)
		}
	}

	// kubectl flotilla tells the two kinds of member apart.
	out, err := env.KubectlFlotilla(ctx, "clusters", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Clusters []plugin.Cluster }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	modes := map[string]string{}
	for _, c := range list.Clusters {
		modes[c.Name] = c.Mode
	}
	if modes[near] != "push" || modes[far] != "pull" {
		t.Errorf("kubectl flotilla clusters: modes %v, want %s push and %s pull", modes, near, far)
	}

	site := env.World.Member(far).Site()
	d := net.Dialer{Timeout: 3 * time.Second}
	if c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(site.Addr, strconv.Itoa(env.KubeletPort(far)))); err == nil {
		c.Close()
		t.Errorf("the host's network opened a connection to %s's kubelet endpoint", far)
	}
}

// TestTunnelComesBack: the Konnectivity agent of the member behind NAT,
// then the server, are killed and started again. Meanwhile no pod is lost
// or replaced, and the virtual node says the host apiserver cannot reach
// its kubelet endpoint while it stays Ready; afterwards logs and exec reach
// the member's pod again, by the agent's own reconnection in the server's
// case, and the node says so.
func TestTunnelComesBack(t *testing.T) {
	ctx := t.Context()
	host := env.World.Host().Client()
	ns := namespace(t, "tunnel-back")
	pod := runOn(t, ns, "app", far)
	k := env.World.Konnectivity()
	site := env.World.Member(far).Site()
	through := func(what string) {
		t.Helper()
		began := time.Now()
		line := "back through the tunnel " + strconv.FormatInt(time.Now().UnixNano(), 36)
		var out string
		var err error
		if werr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			out, err = kubectl(ctx, strings.NewReader(line+"\n"), "exec", "-i", "-n", ns, pod.Name, "--", "head", "-n", "1")
			return err == nil && out == line+"\n", nil
		}); werr != nil {
			t.Fatalf("exec after %s: %q, %v", what, out, err)
		}
		t.Logf("exec works again %s after %s", time.Since(began).Round(time.Millisecond), what)
	}

	if err := k.Agent(testworld.AgentOf(far)).Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl(ctx, nil, "logs", "-n", ns, pod.Name); err == nil {
		t.Error("kubectl logs reached the member behind NAT with its agent dead")
	}
	kubeletAPI(t, corev1.ConditionTrue, "the agent is down")
	if err := k.StartAgent(env.World, testworld.AgentOf(far), site); err != nil {
		t.Fatal(err)
	}
	through("the agent was restarted")
	kubeletAPI(t, corev1.ConditionFalse, "the agent is back")

	if err := k.Server().Kill(); err != nil {
		t.Fatal(err)
	}
	if err := k.RestartServer(env.World); err != nil {
		t.Fatal(err)
	}
	through("the server was restarted (the agents reconnect by themselves)")

	after, err := host.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || after.UID != pod.UID || !podstate.Ready(after) {
		t.Errorf("the pod after the outages: %v (uid %v, was %v)", err, after.GetUID(), pod.UID)
	}
	if n := restarts(after); n != 0 {
		t.Errorf("the pod's containers restarted %d times", n)
	}
}

// kubeletAPI waits until far's virtual node has condition
// KubeletAPIUnreachable with status, and checks that it is Ready all the
// same: pods keep being forwarded.
func kubeletAPI(t *testing.T, status corev1.ConditionStatus, when string) {
	t.Helper()
	var last string
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := env.World.Host().Client().CoreV1().Nodes().Get(ctx, far, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var api, ready corev1.NodeCondition
		for _, c := range n.Status.Conditions {
			switch c.Type {
			case wellknown.NodeKubeletAPIUnreachable:
				api = c
			case corev1.NodeReady:
				ready = c
			}
		}
		last = fmt.Sprintf("%s=%s %q, Ready=%s", api.Type, api.Status, api.Message, ready.Status)
		if ready.Status != corev1.ConditionTrue {
			return false, fmt.Errorf("%s is not Ready while %s: %s", far, when, last)
		}
		return api.Status == status, nil
	}); err != nil {
		t.Fatalf("%s KubeletAPIUnreachable=%s while %s: %v (last: %s)", far, status, when, err, last)
	}
	t.Logf("while %s: %s", when, last)
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// TestForgedAgentGetsNoTraffic: a site that holds an agent certificate
// for its own address (as any pull-mode member does) claims the address
// of the member behind NAT, and has that address on its own loopback with
// a listener on the member's kubelet port. The gate in front of the
// server refuses the claim, which the certificate does not name, and says
// so in its log: the forger never connects, every exec reaches the real
// member, and with the member's own agent dead, exec fails rather than
// reach the forger, which is never sent a connection at all.
func TestForgedAgentGetsNoTraffic(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "forged-agent")
	pod := runOn(t, ns, "app", far)
	victim := env.World.Member(far).Site()

	evil, err := testworld.NewSite("evil", 99)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = evil.Close() })
	ip, err := exec.LookPath("ip")
	if err != nil {
		ip = "/usr/sbin/ip"
	}
	if out, err := evil.Command(ip, "addr", "add", victim.Addr+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	l, err := evil.Listen("tcp", net.JoinHostPort(victim.Addr, strconv.Itoa(env.KubeletPort(far))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var mu sync.Mutex
	conns := 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns++
			mu.Unlock()
			c.Close()
		}
	}()
	k := env.World.Konnectivity()
	gateLog, err := os.Stat(k.Gate().LogPath())
	if err != nil {
		t.Fatal(err)
	}
	const forger = "konnectivity-agent-forger"
	claim := "ipv4=" + victim.Addr
	if err := k.StartAgentAs(env.World, forger, evil, claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Agent(forger).Kill() })
	// Refused on every try, it never becomes ready, and the gate says why.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := k.WaitAgentConnected(wctx, forger); err == nil {
		t.Error("the forger's agent connected to the server")
	} else {
		t.Logf("the forger's agent: %v", err)
	}
	b, err := os.ReadFile(k.Gate().LogPath())
	if err != nil {
		t.Fatal(err)
	}
	refusals := 0
	for line := range strings.Lines(string(b[gateLog.Size():])) {
		if strings.Contains(line, "refused an identifier") && strings.Contains(line, claim) && strings.Contains(line, forger) {
			if refusals == 0 {
				t.Logf("the gate: %s", strings.TrimSpace(line))
			}
			refusals++
		}
	}
	if refusals == 0 {
		t.Errorf("the gate logged no refusal naming %s and %s", claim, forger)
	}

	for i := range 20 {
		line := fmt.Sprintf("only for %s %d", far, i)
		out, err := kubectl(ctx, strings.NewReader(line+"\n"), "exec", "-i", "-n", ns, pod.Name, "--", "head", "-n", "1")
		if err != nil || out != line+"\n" {
			t.Errorf("exec %d with the forger about: %q, %v", i, out, err)
		}
	}
	// With the member's own agent gone, no agent claims the address.
	if err := k.Agent(testworld.AgentOf(far)).Kill(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.StartAgent(env.World, testworld.AgentOf(far), victim); err != nil {
			t.Error(err)
		}
	})
	if out, err := kubectl(ctx, strings.NewReader("only for the member\n"), "exec", "-i", "-n", ns, pod.Name, "--", "head", "-n", "1"); err == nil {
		t.Errorf("exec with the member's agent dead answered %q", out)
	} else {
		t.Logf("exec with the member's agent dead: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 0 {
		t.Errorf("the forger was sent %d connections", conns)
	}
}

// TestHostComesBack: the host apiserver goes away and comes back. The
// member behind NAT keeps its pod running throughout, and its flotilla-node,
// which only ever dials out, reconnects by itself: the virtual node is
// Ready again with fresh heartbeats, a new pod placed on it runs, and exec
// reaches the old one, which was neither replaced nor restarted.
func TestHostComesBack(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "host-back")
	pod := runOn(t, ns, "before", far)
	member := env.World.Member(far).Client()
	before, err := member.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hostW := env.World.Host()
	node := env.Node(far)
	logged, err := os.Stat(node.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := hostW.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	down := true
	t.Cleanup(func() {
		if down {
			if err := hostW.StartAPIServer(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	// flotilla-node finds the host gone (it says so in its log) while the
	// member's pod runs on.
	poll(t, 30*time.Second, "flotilla-node in "+far+" notices the host is gone", func(context.Context) (bool, string) {
		b, err := os.ReadFile(node.LogPath())
		if err != nil {
			return false, err.Error()
		}
		return bytes.Contains(b[logged.Size():], []byte("connection refused")), ""
	})
	if mp, err := member.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || mp.UID != before.UID || !podstate.Ready(mp) {
		t.Errorf("the member pod while the host is gone: %v (uid %v, was %v)", err, mp.GetUID(), before.UID)
	}
	back := time.Now()
	if err := hostW.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	down = false
	host := hostW.Client()
	poll(t, time.Minute, far+" Ready with a heartbeat after the host came back", func(ctx context.Context) (bool, string) {
		n, err := host.CoreV1().Nodes().Get(ctx, far, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue && c.LastHeartbeatTime.After(back), fmt.Sprintf("%s, heartbeat %s", c.Status, c.LastHeartbeatTime)
			}
		}
		return false, "no Ready condition"
	})
	t.Logf("%s Ready again %s after the host apiserver was started", far, time.Since(back).Round(time.Millisecond))
	runOn(t, ns, "after", far)
	line := "after the host came back " + strconv.FormatInt(time.Now().UnixNano(), 36)
	if out, err := kubectl(ctx, strings.NewReader(line+"\n"), "exec", "-i", "-n", ns, pod.Name, "--", "head", "-n", "1"); err != nil || out != line+"\n" {
		t.Errorf("exec into the old pod: %q, %v", out, err)
	}
	if mp, err := member.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || mp.UID != before.UID || restarts(mp) != 0 {
		t.Errorf("the member pod after the outage: %v (uid %v, was %v; %d restarts)", err, mp.GetUID(), before.UID, restarts(mp))
	}
}

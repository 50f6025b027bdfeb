// Package pull_test runs flotilla with a member behind NAT (pull mode):
// its flotilla-node runs in the member's own network, only dialing out to
// the host, and the host apiserver reaches its kubelet endpoint through
// Konnectivity. A second member, reached directly (push mode), shares the
// world.
package pull_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
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
	w, err := testworld.Start(ctx, testworld.Config{Logf: logf, Konnectivity: true, KeepDir: os.Getenv("FLOTILLA_E2E_KEEP") != "",
		Members: []testworld.ClusterConfig{
			{Name: near, Nodes: []testworld.NodeSpec{{Name: near + "-node-1"}}},
			{Name: far, BehindNAT: true, Nodes: []testworld.NodeSpec{{Name: far + "-node-1"}}},
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
	if env, err = fleet.Deploy(ctx, w, bin, "--log-level=debug"); err != nil {
		logf("deploy flotilla: %v", err)
		return 1
	}
	logf("flotilla-node in %s (push) and in %s (pull) Ready in %s", near, far, time.Since(started).Round(time.Millisecond))
	return m.Run()
}

func kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, env.World.Bin().Kubectl, append([]string{"--kubeconfig=" + env.World.Host().KubeconfigPath}, args...)...)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// TestPullMember: a pod placed on the member behind NAT runs there, and
// kubectl logs and exec (with stdin) reach it through the host apiserver,
// as they reach the pod of the member in the host's network, though
// nothing in the host's network can open a connection to that member's
// kubelet endpoint.
func TestPullMember(t *testing.T) {
	ctx := t.Context()
	host := env.World.Host().Client()
	ns := "pull-member"
	if _, err := host.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{near, far} {
		if _, err := host.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "app-" + member},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{wellknown.ClusterLabel: member},
				Tolerations: []corev1.Toleration{{Key: wellknown.ProviderTaintKey, Operator: corev1.TolerationOpEqual,
					Value: wellknown.ProviderTaintValue, Effect: corev1.TaintEffectNoSchedule}},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers:                    []corev1.Container{{Name: "app", Image: "busybox:1.36"}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, member := range []string{near, far} {
		var last string
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := host.CoreV1().Pods(ns).Get(ctx, "app-"+member, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = fmt.Sprintf("%s on %q", p.Status.Phase, p.Spec.NodeName)
			return p.Spec.NodeName == member && podstate.Ready(p), nil
		}); err != nil {
			t.Fatalf("app-%s Running in %s: %v (last: %s)", member, member, err, last)
		}
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

	site := env.World.Member(far).Site()
	d := net.Dialer{Timeout: 3 * time.Second}
	if c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(site.Addr, strconv.Itoa(env.KubeletPort(far)))); err == nil {
		c.Close()
		t.Errorf("the host's network opened a connection to %s's kubelet endpoint", far)
	}
}

// Package streaming holds what tests of the kubelet API's long-lived
// streams share: a kubectl left running whose output a test watches, the
// terminal size a TTY client reports, and the echo server kwok forwards
// pod ports to. Test-only.
package streaming

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"flotilla.io/flotilla/test/testworld"
)

// Buffer is a bytes.Buffer that a command writes while a test reads.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Kubectl starts a long-running kubectl against w's host (logs -f,
// attach, port-forward) and returns its output as it comes; it is stopped
// when the test ends, and its errors are logged if the test failed.
func Kubectl(t *testing.T, w *testworld.World, args ...string) *Buffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, w.Bin().Kubectl, append([]string{"--kubeconfig=" + w.Host().KubeconfigPath}, args...)...)
	out, errOut := &Buffer{}, &Buffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start kubectl %s: %v", strings.Join(args, " "), err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kubectl %s stderr:\n%s", strings.Join(args, " "), errOut.String())
		}
	})
	return out
}

// OneSize reports one terminal size, then none until Ctx ends.
type OneSize struct {
	Ctx  context.Context
	Size remotecommand.TerminalSize
	sent bool
}

func (q *OneSize) Next() *remotecommand.TerminalSize {
	if !q.sent {
		q.sent = true
		return &q.Size
	}
	<-q.Ctx.Done()
	return nil
}

// ServeEcho answers every line of every connection with "echo: <line>"
// until l is closed.
func ServeEcho(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			sc := bufio.NewScanner(conn)
			for sc.Scan() {
				if _, err := fmt.Fprintf(conn, "echo: %s\n", sc.Text()); err != nil {
					return
				}
			}
		}()
	}
}

// ExecTTY runs a command in container of pod ns/name through w's host
// apiserver with a TTY of width x height, the way kubectl does on a
// terminal (it allocates none otherwise), and returns what the command
// printed: the terminal size it saw (stty size) and "tty" if its stdin is
// one.
func ExecTTY(ctx context.Context, w *testworld.World, ns, name, container string, width, height uint16) (string, error) {
	req := w.Host().Client().CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: container,
		// The size arrives on its own stream; wait for it. kwok drops TTY
		// output not yet relayed when the command exits, hence the final
		// sleep.
		Command: []string{"sh", "-c", `while [ "$(stty size)" = "0 0" ]; do sleep 0.1; done; stty size; test -t 0 && echo tty; sleep 1`},
		Stdin:   true, Stdout: true, TTY: true,
	}, scheme.ParameterCodec)
	executor, err := remotecommand.NewWebSocketExecutor(w.Host().RESTConfig(), http.MethodGet, req.URL().String())
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stdin, stdinW := io.Pipe()
	defer stdinW.Close()
	var out Buffer
	err = executor.StreamWithContext(ctx, remotecommand.StreamOptions{
		Stdin: stdin, Stdout: &out, Tty: true,
		TerminalSizeQueue: &OneSize{Ctx: ctx, Size: remotecommand.TerminalSize{Width: width, Height: height}},
	})
	return out.String(), err
}

// RoundTrip sends a line to the local end of a port-forward, a fresh
// connection each time, and returns the echo server's answer.
func RoundTrip(local, msg string) (string, error) {
	conn, err := net.DialTimeout("tcp", local, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := fmt.Fprintln(conn, msg); err != nil {
		return "", err
	}
	return bufio.NewReader(conn).ReadString('\n')
}

// PortForward listens where kwok forwards every pod port (AdvertiseIP,
// KwokPortForwardPort, which a site reaches through its gateway) with an
// echo server, starts kubectl port-forward to port 8080 of pod ns/name
// through w's host, and returns the local address once kubectl listens.
func PortForward(t *testing.T, w *testworld.World, ns, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(testworld.AdvertiseIP, strconv.Itoa(testworld.KwokPortForwardPort)))
	if err != nil {
		t.Fatalf("listen where kwok forwards to: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go ServeEcho(l)
	out := Kubectl(t, w, "port-forward", "-n", ns, "pod/"+name, ":8080")
	forwarding := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
	var local string
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		m := forwarding.FindStringSubmatch(out.String())
		if m != nil {
			local = net.JoinHostPort("127.0.0.1", m[1])
		}
		return m != nil, nil
	}); err != nil {
		t.Fatalf("kubectl port-forward to listen: %v (output %q)", err, out.String())
	}
	return local
}

// EchoTwice sends a line through the port-forward at local on two
// connections of its own — each a stream of its own through the
// apiservers — and checks that the echo server answers each.
func EchoTwice(t *testing.T, local, via string) {
	t.Helper()
	for i := range 2 {
		msg := fmt.Sprintf("ping %d through %s", i, via)
		reply, err := RoundTrip(local, msg)
		if err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
		if want := "echo: " + msg + "\n"; reply != want {
			t.Errorf("reply %d = %q, want %q", i, reply, want)
		}
	}
}

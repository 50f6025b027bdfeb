// This file serves the kubelet API of the forwarded pods through the
// member apiserver: logs, exec, attach and port-forward.

package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	streamhttp "k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/provider/stats"
)

// GetContainerLogs streams a container's logs from the member pod.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	ctx, span := trace.StartSpan(ctx, "provider.GetContainerLogs")
	defer span.End()
	if err := p.refused(namespace, podName); err != nil {
		return nil, err
	}
	t := p.target(namespace)
	o := &corev1.PodLogOptions{
		Container:  containerName,
		Follow:     opts.Follow,
		Previous:   opts.Previous,
		Timestamps: opts.Timestamps,
	}
	if opts.Tail > 0 {
		o.TailLines = ptr.To(int64(opts.Tail))
	}
	if opts.LimitBytes > 0 {
		o.LimitBytes = ptr.To(int64(opts.LimitBytes))
	}
	if opts.SinceSeconds > 0 {
		o.SinceSeconds = ptr.To(int64(opts.SinceSeconds))
	}
	if !opts.SinceTime.IsZero() {
		o.SinceTime = &metav1.Time{Time: opts.SinceTime}
	}
	rc, err := p.cfg.MemberClient.CoreV1().Pods(t.Namespace).GetLogs(podName, o).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("logs of %s/%s in cluster %s: %w", t.Namespace, podName, t.Cluster, err)
	}
	return rc, nil
}

// RunInContainer runs a command in the member pod's container through the
// member apiserver, relaying the caller's streams.
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	ctx, span := trace.StartSpan(ctx, "provider.RunInContainer")
	defer span.End()
	t := p.target(namespace)
	req := p.cfg.MemberClient.CoreV1().RESTClient().Post().Resource("pods").Namespace(t.Namespace).Name(podName).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: containerName,
		Command:   cmd,
		Stdin:     attach.Stdin() != nil,
		Stdout:    attach.Stdout() != nil,
		Stderr:    attach.Stderr() != nil && !attach.TTY(), // a TTY merges it into stdout
		TTY:       attach.TTY(),
	}, scheme.ParameterCodec)
	return p.stream(ctx, req.URL(), attach)
}

// AttachToContainer attaches to the member pod's container through the
// member apiserver.
func (p *Provider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	ctx, span := trace.StartSpan(ctx, "provider.AttachToContainer")
	defer span.End()
	if err := p.refused(namespace, podName); err != nil {
		return err
	}
	t := p.target(namespace)
	req := p.cfg.MemberClient.CoreV1().RESTClient().Post().Resource("pods").Namespace(t.Namespace).Name(podName).
		SubResource("attach").VersionedParams(&corev1.PodAttachOptions{
		Container: containerName,
		Stdin:     attach.Stdin() != nil,
		Stdout:    attach.Stdout() != nil,
		Stderr:    attach.Stderr() != nil && !attach.TTY(),
		TTY:       attach.TTY(),
	}, scheme.ParameterCodec)
	return p.stream(ctx, req.URL(), attach)
}

// stream runs an exec or attach request against the member apiserver. Its
// error is returned as is: virtual-kubelet recognises a command's exit code
// only on an unwrapped exec.ExitError.
func (p *Provider) stream(ctx context.Context, u *url.URL, attach api.AttachIO) error {
	if p.cfg.MemberConfig == nil {
		return errdefs.InvalidInput("provider: no member REST config for streaming")
	}
	spdyExec, err := remotecommand.NewSPDYExecutor(p.cfg.MemberConfig, http.MethodPost, u)
	if err != nil {
		return fmt.Errorf("stream %s in cluster %s: %w", u.Path, p.cfg.NodeName, err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(p.cfg.MemberConfig, http.MethodGet, u.String())
	if err != nil {
		return fmt.Errorf("stream %s in cluster %s: %w", u.Path, p.cfg.NodeName, err)
	}
	// Fall back only when the member cannot speak WebSocket: after any other
	// error (a non-zero exit, say) the command would run a second time.
	exec, err := remotecommand.NewFallbackExecutor(wsExec, spdyExec, fallBackToSPDY)
	if err != nil {
		return fmt.Errorf("stream %s in cluster %s: %w", u.Path, p.cfg.NodeName, err)
	}
	// Ends the terminal size relay, which would otherwise wait for a resize
	// that never comes.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := remotecommand.StreamOptions{Tty: attach.TTY()}
	if in := attach.Stdin(); in != nil {
		opts.Stdin = in
	}
	if out := attach.Stdout(); out != nil {
		opts.Stdout = out
	}
	if e := attach.Stderr(); e != nil && !attach.TTY() {
		opts.Stderr = e
	}
	if attach.TTY() {
		opts.TerminalSizeQueue = sizeQueue{ctx: ctx, sizes: attach.Resize()}
	}
	return exec.StreamWithContext(ctx, opts)
}

// sizeQueue relays the caller's terminal sizes until the stream ends.
type sizeQueue struct {
	ctx   context.Context
	sizes <-chan api.TermSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s, ok := <-q.sizes:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: s.Width, Height: s.Height}
	case <-q.ctx.Done():
		return nil
	}
}

// PortForward relays one port-forward stream to port of the member pod
// through the member apiserver, the way kubectl port-forward does for one
// connection: an error stream and a data stream over one connection,
// WebSocket-tunnelled when the member apiserver supports it, SPDY otherwise.
// It returns when the member side has sent everything, or when the caller's
// side fails; the caller closes stream.
func (p *Provider) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	ctx, span := trace.StartSpan(ctx, "provider.PortForward")
	defer span.End()
	if p.cfg.MemberConfig == nil {
		return errdefs.InvalidInput("provider: no member REST config for streaming")
	}
	t := p.target(namespace)
	u := p.cfg.MemberClient.CoreV1().RESTClient().Post().Resource("pods").Namespace(t.Namespace).Name(podName).
		SubResource("portforward").URL()
	conn, err := p.dialPortForward(u)
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s in cluster %s: %w", t.Namespace, podName, t.Cluster, err)
	}
	defer conn.Close()
	// The connection does not watch ctx; closing it ends both copies.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errorStream, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s in cluster %s: error stream: %w", t.Namespace, podName, t.Cluster, err)
	}
	// Nothing is sent on the error stream, only received.
	errorStream.Close()
	remoteErr := make(chan error, 1)
	go func() {
		msg, err := io.ReadAll(errorStream)
		switch {
		case err != nil:
			remoteErr <- fmt.Errorf("read error stream: %w", err)
		case len(msg) > 0:
			remoteErr <- errors.New(string(msg))
		default:
			remoteErr <- nil
		}
	}()

	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	dataStream, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s in cluster %s: data stream: %w", t.Namespace, podName, t.Cluster, err)
	}
	remoteDone := make(chan struct{})
	localFailed := make(chan error, 1)
	go func() {
		// io.Copy ends when the member side closes the stream: the pod's
		// port closed the connection.
		_, _ = io.Copy(stream, dataStream)
		close(remoteDone)
	}()
	go func() {
		// Half-close toward the member once the caller is done sending.
		defer dataStream.Close()
		if _, err := io.Copy(dataStream, stream); err != nil {
			localFailed <- err
		}
	}()
	select {
	case <-remoteDone:
	case err := <-localFailed:
		_ = dataStream.Reset()
		return fmt.Errorf("port-forward to %s/%s in cluster %s: %w", t.Namespace, podName, t.Cluster, err)
	case <-ctx.Done():
		return ctx.Err()
	}
	// The error stream is only final once the data stream is done with.
	_ = dataStream.Reset()
	if err := <-remoteErr; err != nil {
		return fmt.Errorf("port-forward to %s/%s in cluster %s: %w", t.Namespace, podName, t.Cluster, err)
	}
	return nil
}

// dialPortForward opens a port-forward connection to the member apiserver.
func (p *Provider) dialPortForward(u *url.URL) (httpstream.Connection, error) {
	transport, upgrader, err := spdy.RoundTripperFor(p.cfg.MemberConfig)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(u, p.cfg.MemberConfig)
	if err != nil {
		return nil, err
	}
	dialer := portforward.NewFallbackDialer(wsDialer, spdyDialer, fallBackToSPDY)
	conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	return conn, err
}

// fallBackToSPDY reports whether a WebSocket attempt failed because the
// member, or a proxy on the way, did not upgrade the connection, which is
// when exec, attach and port-forward retry over SPDY. client-go's WebSocket
// transport reports that with k8s.io/streaming's error types, which
// apimachinery's httpstream predicates do not recognise.
func fallBackToSPDY(err error) bool {
	return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
}

// Kubelet is what a virtual node's kubelet endpoint serves: logs, exec,
// attach and port-forward of the pods it forwarded, through the member
// apiserver (Provider), and stats and resource metrics computed from the
// member's metrics.k8s.io API (ResourceMetrics).
type Kubelet struct {
	*Provider
	*stats.ResourceMetrics
}

// KubeletAPI is what serves a virtual node's kubelet endpoint (the
// handlers of virtual-kubelet's api.PodHandler).
type KubeletAPI interface {
	GetPods(ctx context.Context) ([]*corev1.Pod, error)
	GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error)
	RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error
	AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error
	GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error)
	GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error)
	PortForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error
}

var _ KubeletAPI = Kubelet{}

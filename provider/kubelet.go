package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	"github.com/virtual-kubelet/virtual-kubelet/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

var _ nodeutil.Provider = (*Provider)(nil)

// GetContainerLogs streams a container's logs from the member pod.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	ctx, span := trace.StartSpan(ctx, "provider.GetContainerLogs")
	defer span.End()
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
		Stderr:    attach.Stderr() != nil,
		TTY:       attach.TTY(),
	}, scheme.ParameterCodec)
	return p.stream(ctx, req.URL(), attach)
}

// AttachToContainer attaches to the member pod's container through the
// member apiserver.
func (p *Provider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	ctx, span := trace.StartSpan(ctx, "provider.AttachToContainer")
	defer span.End()
	t := p.target(namespace)
	req := p.cfg.MemberClient.CoreV1().RESTClient().Post().Resource("pods").Namespace(t.Namespace).Name(podName).
		SubResource("attach").VersionedParams(&corev1.PodAttachOptions{
		Container: containerName,
		Stdin:     attach.Stdin() != nil,
		Stdout:    attach.Stdout() != nil,
		Stderr:    attach.Stderr() != nil,
		TTY:       attach.TTY(),
	}, scheme.ParameterCodec)
	return p.stream(ctx, req.URL(), attach)
}

func (p *Provider) stream(ctx context.Context, u *url.URL, attach api.AttachIO) error {
	if p.cfg.MemberConfig == nil {
		return errdefs.InvalidInput("provider: no member REST config for streaming")
	}
	spdyExec, err := remotecommand.NewSPDYExecutor(p.cfg.MemberConfig, http.MethodPost, u)
	if err != nil {
		return err
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(p.cfg.MemberConfig, http.MethodGet, u.String())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(wsExec, spdyExec, func(err error) bool { return true })
	if err != nil {
		return err
	}
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
		opts.TerminalSizeQueue = sizeQueue(attach.Resize())
	}
	return exec.StreamWithContext(ctx, opts)
}

type sizeQueue <-chan api.TermSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &remotecommand.TerminalSize{Width: s.Width, Height: s.Height}
}

// PortForward is not supported yet.
func (p *Provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errdefs.InvalidInput("port-forward through flotilla is not supported yet")
}

// GetStatsSummary is not supported yet.
func (p *Provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return nil, errdefs.InvalidInput("stats through flotilla are not supported yet")
}

// GetMetricsResource is not supported yet.
func (p *Provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, errdefs.InvalidInput("resource metrics through flotilla are not supported yet")
}

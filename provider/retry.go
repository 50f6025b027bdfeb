package provider

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/podstate"
)

// retryForward forwards again a host pod whose forwarding failed for a
// reason that may pass, or that waited for a missing object; it gives up on
// a pod that is gone, finished, being deleted or bound elsewhere.
func (p *Provider) retryForward(ctx context.Context, key string) (err error) {
	ctx, span := p.startSpan(ctx, "provider.retryForward", key)
	defer func() {
		span.SetStatus(err)
		span.End()
	}()
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	host, err := p.hostPods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if host.DeletionTimestamp != nil || podstate.Terminal(host) || host.Spec.NodeName != p.cfg.NodeName {
		return nil
	}
	held, err := p.forward(ctx, host.DeepCopy())
	p.cfg.Metrics.created(p.cfg.NodeName, held, err)
	if err != nil && !transient(err) {
		p.forwardFailed(ctx, host, err)
		return nil
	}
	return err
}

// forwardFailed fails a host pod that retrying cannot forward, with the
// reason in its status, as a kubelet does with a pod it rejects: left
// Pending, it would wait for good with only an event to tell why.
func (p *Provider) forwardFailed(ctx context.Context, host *corev1.Pod, err error) {
	log.G(ctx).WithError(err).Warn("forwarding failed for good")
	p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, EventForwardFailed,
		"Forwarding to member cluster %s failed: %v", p.cfg.NodeName, err)
	p.publish(host, ForwardFailedStatus(host, p.cfg.NodeName, err))
}

// errRetry marks errors that resolve themselves with time.
var errRetry = errors.New("retry")

// transient reports whether err may go away by itself. It judges by the
// errors' types and status causes, never by their wording, with one
// exception: the member's ServiceAccount admission refuses a pod whose
// service account is not made yet with a Forbidden that carries no cause.
func transient(err error) bool {
	if errors.Is(err, errRetry) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		var netErr net.Error
		return errors.As(err, &netErr) || connectionLost(err)
	}
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err),
		namespaceTerminating(err):
		return true
	case apierrors.IsForbidden(err):
		// Admission in a namespace that was just created: its service account
		// is made by the member's controller-manager a moment later.
		return strings.Contains(status.Status().Message, "error looking up service account")
	}
	return false
}

// namespaceTerminating reports whether the apiserver refused to create an
// object in a namespace being deleted.
func namespaceTerminating(err error) bool {
	return apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// connectionLost reports whether err is a connection to the apiserver that
// could not be made or broke off.
func connectionLost(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// This file forwards again the pods whose forwarding failed for a reason
// that may pass, and fails those it cannot.

package provider

import (
	"context"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/transient"
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
	host, err := p.liveHostPod(key)
	if host == nil || err != nil {
		return err
	}
	held, err := p.forward(ctx, host.DeepCopy())
	p.cfg.Metrics.created(p.cfg.NodeName, held, err)
	if err != nil && !transient.Is(err) {
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
	p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, wellknown.EventForwardFailed,
		"Forwarding to member cluster %s failed: %v", p.cfg.NodeName, err)
	p.publish(host, ForwardFailedStatus(host, p.cfg.NodeName, err))
}

// liveHostPod returns the host pod of key from the cache, or nil when it is
// gone, being deleted, finished or bound to another node: nothing more is
// done for such a pod.
func (p *Provider) liveHostPod(key string) (*corev1.Pod, error) {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	host, err := p.hostPods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if host.DeletionTimestamp != nil || podstate.Terminal(host) || host.Spec.NodeName != p.cfg.NodeName {
		return nil, nil
	}
	return host, nil
}

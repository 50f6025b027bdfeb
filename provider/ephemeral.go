// This file brings the ephemeral containers added to a host pod (kubectl
// debug pod/...) to its member pod.

package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/translate"
)

// syncEphemeral adds to the member pod the ephemeral containers of src (the
// host pod with its overrides) that it lacks, through the member's
// ephemeralcontainers subresource: a pod's ephemeral containers cannot be
// set on create nor by an update of the pod. virtual-kubelet calls UpdatePod
// for them because GetPod's view shows the member's ephemeral containers
// (translate.HostView).
//
// It never fails the pod: virtual-kubelet fails a host pod whose UpdatePod
// returns an error (Pending, or Failed under restartPolicy Never), and a
// debugging session must not end the pod it debugs. A member that refuses
// (an old version, a policy that forbids them) is reported with its
// message on the host pod; a failure that may pass is retried.
func (p *Provider) syncEphemeral(ctx context.Context, host, src *corev1.Pod, t translate.Target) {
	if err := p.addEphemeral(ctx, host, src, t); err != nil {
		p.ephemeralFailed(ctx, host, t, err)
	}
}

// ephemeralFailed reports a failure to add ephemeral containers on the
// host pod, and has one that may pass retried.
func (p *Provider) ephemeralFailed(ctx context.Context, host *corev1.Pod, t translate.Target, err error) {
	if transient.Is(err) || apierrors.IsConflict(err) {
		log.G(ctx).WithError(err).WithField("pod", host.Namespace+"/"+host.Name).Info("adding ephemeral containers failed, will retry")
		p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, wellknown.EventEphemeralContainerRetrying,
			"Adding ephemeral containers to the pod in member cluster %s failed, retrying: %v", t.Cluster, err)
		p.ephemeralQueue.AddRateLimited(host.Namespace + "/" + host.Name)
		return
	}
	log.G(ctx).WithError(err).WithField("pod", host.Namespace+"/"+host.Name).Warn("member refused ephemeral containers")
	p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, wellknown.EventEphemeralContainerRefused,
		"Member cluster %s refused the ephemeral containers: %v", t.Cluster, err)
}

// addEphemeral adds what syncEphemeral adds, and returns the member's
// refusal or the failure.
func (p *Provider) addEphemeral(ctx context.Context, host, src *corev1.Pod, t translate.Target) error {
	want := translate.EphemeralToMember(src)
	if len(want) == 0 {
		return nil
	}
	pods := p.cfg.MemberClient.CoreV1().Pods(t.Namespace)
	cur, err := pods.Get(ctx, host.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // not forwarded yet: forwarding adds them (forward)
	}
	if err != nil {
		return fmt.Errorf("get pod %s/%s in cluster %s: %w", t.Namespace, host.Name, t.Cluster, err)
	}
	if !p.ours(cur) || cur.Labels[wellknown.HostUIDLabel] != string(host.UID) {
		return nil // not this host pod's: forwarding deals with it
	}
	if len(translate.MissingEphemeral(cur.Spec.EphemeralContainers, want)) == 0 {
		return nil
	}
	// A debugging container may read a Secret or ConfigMap the pod's
	// other containers do not.
	if err := p.deps.mirrorEphemeral(ctx, host, t); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		missing := translate.MissingEphemeral(cur.Spec.EphemeralContainers, want)
		if len(missing) == 0 {
			return nil
		}
		upd := cur.DeepCopy()
		upd.Spec.EphemeralContainers = append(upd.Spec.EphemeralContainers, missing...)
		_, err := pods.UpdateEphemeralContainers(ctx, host.Name, upd, metav1.UpdateOptions{})
		switch {
		case apierrors.IsConflict(err):
			fresh, gerr := pods.Get(ctx, host.Name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			cur = fresh
			return err
		case err != nil:
			return fmt.Errorf("add ephemeral container(s) %s to pod %s/%s in cluster %s: %w", names(missing), t.Namespace, host.Name, t.Cluster, err)
		}
		log.G(ctx).WithField("pod", host.Namespace+"/"+host.Name).WithField("containers", names(missing)).Info("added ephemeral containers")
		return nil
	})
}

// retryEphemeral adds again the ephemeral containers of a host pod whose
// adding failed for a reason that may pass.
func (p *Provider) retryEphemeral(ctx context.Context, key string) error {
	host, err := p.liveHostPod(key)
	if host == nil || err != nil {
		return err
	}
	t := p.target(host.Namespace)
	src, _, err := p.override(ctx, host)
	if err != nil {
		return err
	}
	err = p.addEphemeral(ctx, host, src, t)
	if err != nil && (transient.Is(err) || apierrors.IsConflict(err)) {
		return err
	}
	if err != nil {
		p.ephemeralFailed(ctx, host, t, err)
	}
	return nil
}

func names(cs []corev1.EphemeralContainer) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return strings.Join(out, ", ")
}

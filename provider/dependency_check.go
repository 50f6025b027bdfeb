// This file checks, before a pod is forwarded, that the Secrets,
// ConfigMaps and ServiceAccounts it uses are mirrored, and holds it with
// the kubelet's events and status while a mandatory one is missing.

package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/mirror"
	"flotilla.io/flotilla/provider/translate"
)

// ensure mirrors what the host pod needs into its member namespace before
// the pod is forwarded, and reports whether the pod can be forwarded. When a
// mandatory object is missing in the host, the pod is not forwarded: it gets
// the kubelet's events and waiting status, stays Pending, and is handed back
// to forwarding as soon as the object is created. A missing optional object
// or image pull secret is reported and the pod forwarded without it. Errors
// are those of the member API.
func (d *dependencies) ensure(ctx context.Context, host *corev1.Pod, t translate.Target) (bool, error) {
	if !cache.WaitForCacheSync(ctx.Done(), d.synced...) {
		return false, fmt.Errorf("wait for the caches of pod dependencies: %w", transient.ErrRetry)
	}
	var present, missing, optional []dependency
	var pull []string
	for _, dep := range d.awaitListed(ctx, host) {
		exists, err := d.kinds[dep.kind].InHost(ctx, host.Namespace, dep.name)
		if err != nil {
			return false, fmt.Errorf("read %s %s/%s: %w", dep.kind, host.Namespace, dep.name, err)
		}
		switch {
		case exists:
			present = append(present, dep)
		case dep.mandatory():
			missing = append(missing, dep)
		case dep.pullOnly():
			pull = append(pull, dep.name)
		default:
			optional = append(optional, dep)
		}
	}
	if len(missing) > 0 {
		d.reportMissing(ctx, host, missing)
		return false, nil
	}
	for _, dep := range present {
		out, err := d.kinds[dep.kind].Apply(ctx, host.Namespace, dep.name, t)
		switch {
		case err != nil:
			return false, fmt.Errorf("mirror %s %s/%s into cluster %s: %w", dep.kind, t.Namespace, dep.name, t.Cluster, err)
		case out == mirror.AbsentInHost:
			return false, fmt.Errorf("%s %s/%s was deleted while being mirrored: %w", dep.kind, host.Namespace, dep.name, transient.ErrRetry)
		case out == mirror.NotOwned:
			d.env.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, wellknown.EventDependencyConflict,
				"%s %q already exists in namespace %s of member cluster %s and is not managed by flotilla; the pod uses it as it is",
				dep.kind, dep.name, t.Namespace, t.Cluster)
		}
	}
	if len(pull) > 0 {
		d.env.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, wellknown.EventFailedToRetrieveImagePullSecret,
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(pull, ", "))
	}
	for _, dep := range optional {
		reason := wellknown.EventOptionalConfigMapNotFound
		if dep.kind == kindSecret {
			reason = wellknown.EventOptionalSecretNotFound
		}
		d.env.cfg.Recorder.Eventf(host, corev1.EventTypeNormal, reason,
			"Optional %s; the pod is forwarded without it, and it is mirrored once it is created", notFound(dep.objectRef))
	}
	return true, nil
}

// reportMissing records the kubelet's events for missing mandatory objects
// on the host pod and shows its containers waiting.
func (d *dependencies) reportMissing(ctx context.Context, host *corev1.Pod, missing []dependency) {
	names := make([]string, 0, len(missing))
	for _, dep := range missing {
		reason, msg := missingEvent(dep)
		d.env.cfg.Recorder.Event(host, corev1.EventTypeWarning, reason, msg)
		if reason, ok := heldBackReason[dep.kind]; ok {
			d.env.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, reason,
				"Mandatory %s; the pod is not forwarded to cluster %s until it exists", notFound(dep.objectRef), d.env.cfg.NodeName)
		}
		names = append(names, dep.kind+"/"+dep.name)
	}
	log.G(ctx).WithField("pod", host.Namespace+"/"+host.Name).WithField("missing", names).
		Info("pod waits for missing dependencies")
	if status := waitingStatus(host, missing); !equality.Semantic.DeepEqual(status, host.Status) {
		d.fwd.publish(host, status)
	}
}

// mirrorEphemeral mirrors into the member the Secrets and ConfigMaps that
// the host pod's ephemeral containers read, of those the host has. A
// missing one does not hold anything back, unlike at forwarding: the pod
// runs already, and the member's kubelet reports the debugging container
// that cannot start, as a kubelet does in one cluster.
func (d *dependencies) mirrorEphemeral(ctx context.Context, host *corev1.Pod, t translate.Target) error {
	if !cache.WaitForCacheSync(ctx.Done(), d.synced...) {
		return fmt.Errorf("wait for the caches of pod dependencies: %w", transient.ErrRetry)
	}
	d.awaitListed(ctx, host) // the pod's watches include its ephemeral containers'
	spec := corev1.PodSpec{EphemeralContainers: host.Spec.EphemeralContainers}
	for _, dep := range podDependencies(&spec, nil) {
		if dep.kind != kindSecret && dep.kind != kindConfigMap {
			continue
		}
		exists, err := d.kinds[dep.kind].InHost(ctx, host.Namespace, dep.name)
		if err != nil {
			return fmt.Errorf("read %s %s/%s: %w", dep.kind, host.Namespace, dep.name, err)
		}
		if !exists {
			continue
		}
		if _, err := d.kinds[dep.kind].Apply(ctx, host.Namespace, dep.name, t); err != nil {
			return fmt.Errorf("mirror %s %s/%s into cluster %s: %w", dep.kind, t.Namespace, dep.name, t.Cluster, err)
		}
	}
	return nil
}

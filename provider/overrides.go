// This file applies override policies to pods and the objects that
// follow them into a cluster.

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/mirror"
)

// ErrOverridesNotSynced is returned by Overrides while the override
// policies cannot be read yet; forwarding is retried.
var ErrOverridesNotSynced = fmt.Errorf("override policies not read yet: %w", transient.ErrRetry)

// Overrides applies OverridePolicies and ClusterOverridePolicies to a pod
// forwarded to a cluster.
type Overrides interface {
	// Pod returns the pod as the cluster should run it, before translation,
	// and the names of the policies applied; it does not change host.
	Pod(ctx context.Context, host *corev1.Pod, cluster string) (*corev1.Pod, []string, error)
	// Object returns a ConfigMap, Secret, ServiceAccount or Service that
	// follows pods as the cluster should get it; it does not change obj.
	Object(obj runtime.Object, kind string, cluster string) (runtime.Object, error)
}

// overridden applies the override policies to a host object about to be
// mirrored into the member.
func overridden[T runtime.Object](e *env, obj T, kind string) (T, error) {
	return mirror.Overridden(objectOverrides(e.cfg.Overrides), e.cfg.NodeName, obj, kind)
}

// override applies the override policies to a copy of the host pod.
func (p *Provider) override(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, []string, error) {
	if p.cfg.Overrides == nil {
		return pod, nil, nil
	}
	out, applied, err := p.cfg.Overrides.Pod(ctx, pod, p.cfg.NodeName)
	if err != nil {
		if !errors.Is(err, transient.ErrRetry) {
			p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, wellknown.EventOverrideFailed,
				"Override policies for cluster %s cannot be applied: %v", p.cfg.NodeName, err)
		}
		return nil, nil, fmt.Errorf("override pod %s/%s for cluster %s: %w", pod.Namespace, pod.Name, p.cfg.NodeName, err)
	}
	return out, applied, nil
}

// recordOverrides writes the names of the override policies applied to a
// forwarded pod on the host pod (wellknown.AppliedOverridesAnnotation), when they
// changed. It goes through the status subresource, which keeps annotation
// changes: a node may write its pods' status, and NodeRestriction refuses
// any other pod update from one.
func (p *Provider) recordOverrides(ctx context.Context, pod *corev1.Pod, applied []string) error {
	want := strings.Join(applied, ",")
	if pod.Annotations[wellknown.AppliedOverridesAnnotation] == want {
		return nil
	}
	value := "null"
	if want != "" {
		b, _ := json.Marshal(want)
		value = string(b)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, wellknown.AppliedOverridesAnnotation, value)
	_, err := p.cfg.HostClient.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record override policies on pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

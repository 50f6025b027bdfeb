// This file keeps a pod from running in a member without a field it
// sets: one the member's Kubernetes does not know (it would prune it),
// one it drops (a feature gate off there), or one the host knows and
// flotilla's own types do not (decoding would have lost it already).

package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podfields"
	"flotilla.io/flotilla/internal/wellknown"
)

// unsupported says why the member cannot run host pod as written, from
// what its API is known to lack (Config.Fields) and, when the host knows
// pod fields flotilla's types do not (Config.HostOnlyFields), from the
// pod as the host stores it; "" when it can.
func (p *Provider) unsupported(ctx context.Context, host *corev1.Pod) (string, error) {
	if f := p.cfg.Fields; f != nil {
		mf := f.Fields()
		if r, ok := mf.Refuses(func(path string) bool { return podfields.Sets(host, path) }); ok {
			if r.Dropped {
				return fit.DroppedFieldReason(r.Path, mf.Version, p.cfg.NodeName), nil
			}
			return fit.UnknownFieldReason(r.Path, mf.Version, p.cfg.NodeName), nil
		}
	}
	if len(p.cfg.HostOnlyFields) == 0 {
		return "", nil
	}
	// The typed pod has lost those fields already: read it as the host
	// stores it.
	raw, err := kube.GetPodJSON(ctx, p.cfg.HostClient, host.Namespace, host.Name)
	if err != nil {
		return "", fmt.Errorf("read pod %s/%s as the host stores it: %w", host.Namespace, host.Name, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("read pod %s/%s as the host stores it: %w", host.Namespace, host.Name, err)
	}
	for _, path := range p.cfg.HostOnlyFields {
		if podfields.SetsJSON(obj, path) {
			return fmt.Sprintf("%s is not known to flotilla-node's Kubernetes types (the host's Kubernetes is newer); it would be lost on the way to cluster %s", path, p.cfg.NodeName), nil
		}
	}
	return "", nil
}

// createdWithout compares what the member stored of a pod with what it
// was sent, and reports the fields it stored empty; it deletes that
// member pod and remembers the fields as dropped by the member, for this
// pod and for placement. Strict field validation keeps unknown fields
// from being stored at all: what is left is what a feature gate clears.
// The host pod is marked refused before the member pod is deleted: the
// deletion's watch event may be handled at once, and must not read as a
// removal by someone else.
func (p *Provider) createdWithout(ctx context.Context, host, sent, stored *corev1.Pod) ([]string, error) {
	lost := podfields.Lost(&sent.Spec, &stored.Spec)
	if len(lost) == 0 {
		return nil, nil
	}
	p.refusedFields.Store(host.Namespace+"/"+host.Name, host.UID)
	err := kube.DeletePod(ctx, p.cfg.MemberClient, sent.Namespace, sent.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(stored.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return lost, fmt.Errorf("delete pod %s/%s in cluster %s, stored without %s: %w", sent.Namespace, sent.Name, p.cfg.NodeName, strings.Join(lost, ", "), err)
	}
	if p.cfg.Fields != nil {
		p.cfg.Fields.Dropped(lost...)
	}
	return lost, nil
}

// refuseFields keeps host pod from running in this cluster, for why (a
// field it sets that the cluster cannot run, see unsupported). A pod
// with a controller is deleted, as a kubelet's rejected pod is replaced:
// placement sends its replacement to a cluster that can run it, the
// member's fit model now telling the field. A bare pod, which nothing
// would replace, stays Pending with the reason, unforwarded.
func (p *Provider) refuseFields(ctx context.Context, host *corev1.Pod, why string) error {
	key := host.Namespace + "/" + host.Name
	p.refusedFields.Store(key, host.UID)
	owner := metav1.GetControllerOf(host)
	if owner != nil {
		if err := p.deleteHostPod(ctx, host); err != nil {
			return err
		}
		log.G(ctx).WithField("pod", key).WithField("why", why).Info("pod sets a field the cluster cannot run: deleted the host pod")
		p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, wellknown.EventFieldNotSupported,
			"%s. Not run there; deleted for its %s to make a replacement that can go to another cluster.", why, owner.Kind)
		return nil
	}
	msg := why + ". Not run there; it has no controller to make a replacement elsewhere, so it stays Pending; delete it to place it again."
	if host.Status.Reason == wellknown.ReasonFieldNotSupported && host.Status.Message == msg {
		return nil // said already
	}
	log.G(ctx).WithField("pod", key).WithField("why", why).Info("pod sets a field the cluster cannot run: left Pending")
	p.cfg.Recorder.Event(host, corev1.EventTypeWarning, wellknown.EventFieldNotSupported, msg)
	status := *host.Status.DeepCopy()
	status.Phase = corev1.PodPending
	status.Reason = wellknown.ReasonFieldNotSupported
	status.Message = msg
	p.publish(host, status)
	return nil
}

// fieldsRefused reports whether the member pod of host went because a
// field was lost (refuseFields), which is not its removal by someone
// else.
func (p *Provider) fieldsRefused(key string, host *corev1.Pod) bool {
	uid, ok := p.refusedFields.Load(key)
	return ok && uid == host.UID
}

// reportStatusBeyond tells, on the host pod, the status fields the member
// set on member pod m that flotilla's types do not know (MemberFields.
// Beyond), and so cannot show in the host: the member pod is read as the
// member stores it, only when the member serves such fields, and each
// field is told once per host pod.
func (p *Provider) reportStatusBeyond(ctx context.Context, key string, host *corev1.Pod, m *memberpod.Pod) {
	if p.cfg.Fields == nil {
		return
	}
	mf := p.cfg.Fields.Fields()
	if len(mf.Beyond) == 0 {
		return
	}
	told := p.toldOf(key, host)
	raw, err := kube.GetPodJSON(ctx, p.cfg.MemberClient, m.Namespace, m.Name)
	if err != nil {
		log.G(ctx).WithError(err).WithField("pod", key).Info("cannot read the member pod as stored to look for status fields flotilla does not know")
		return
	}
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil {
		return
	}
	for _, path := range mf.Beyond {
		if !podfields.SetsJSON(obj, path) || !told.add(path) {
			continue
		}
		p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, wellknown.EventStatusFieldNotCarried,
			"cluster %s (%s) set %s, which flotilla-node's Kubernetes types do not know: it is not shown in the host",
			p.cfg.NodeName, cmp.Or(mf.Version, "version unknown"), path)
	}
}

// reportStatusHostLacks tells, on the host pod, the status fields member
// pod m sets that the host's API does not serve (Config.HostLacks): the
// host drops them when the status is written. Each field is told once per
// host pod.
func (p *Provider) reportStatusHostLacks(key string, host *corev1.Pod, m *memberpod.Pod) {
	if len(p.cfg.HostLacks) == 0 {
		return
	}
	status := &corev1.Pod{Status: m.Status}
	for _, path := range p.cfg.HostLacks {
		if !podfields.Sets(status, path) || !p.toldOf(key, host).add(path) {
			continue
		}
		p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, wellknown.EventStatusFieldNotCarried,
			"cluster %s set %s, which the host's Kubernetes (%s) does not know: it is not shown in the host",
			p.cfg.NodeName, path, cmp.Or(p.cfg.HostVersion, "version unknown"))
	}
}

// toldOf returns the fields told of on host pod key, forgetting those of
// an earlier pod of the same name.
func (p *Provider) toldOf(key string, host *corev1.Pod) *toldFields {
	v, _ := p.statusBeyond.LoadOrStore(key, &toldFields{uid: host.UID})
	told := v.(*toldFields)
	if told.uid != host.UID {
		told = &toldFields{uid: host.UID}
		p.statusBeyond.Store(key, told)
	}
	return told
}

// toldFields are the fields told of on one host pod.
type toldFields struct {
	uid  types.UID
	mu   sync.Mutex
	told []string
}

// add reports whether path was not told yet, and keeps it.
func (t *toldFields) add(path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if slices.Contains(t.told, path) {
		return false
	}
	t.told = append(t.told, path)
	return true
}

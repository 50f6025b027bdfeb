package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/mirror"
	"flotilla.io/flotilla/provider/translate"
)

func (p *Provider) deleteHostPod(ctx context.Context, host *corev1.Pod) error {
	err := kube.DeletePod(ctx, p.cfg.HostClient, host.Namespace, host.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(host.UID)),
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finish deletion of host pod %s/%s: %w", host.Namespace, host.Name, err)
	}
	return nil
}

// whole returns the host pod virtual-kubelet handed the provider, as the
// cache holds it when virtual-kubelet had only a view of it (podcache.VirtualKubeletView). It
// reports false when the cache no longer holds that pod: a view is then
// all there is, and it must never be forwarded.
func (p *Provider) whole(pod *corev1.Pod) (*corev1.Pod, bool) {
	if !podcache.IsVirtualKubeletView(pod) {
		return pod, true
	}
	host, err := p.hostPods.Pods(pod.Namespace).Get(pod.Name)
	if err != nil || host.UID != pod.UID {
		return pod, false
	}
	return host, true
}

// CreatePod forwards a host pod into the member. Failures that may pass
// (the member is unreachable, the namespace's service account is not there
// yet) are retried in the background so that a pod with restartPolicy Never
// is not failed for them; other failures are returned, and virtual-kubelet
// records them on the host pod.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) (err error) {
	key := pod.Namespace + "/" + pod.Name
	ctx, span := p.startSpan(ctx, "provider.CreatePod", key)
	defer span.End()
	pod, ok := p.whole(pod)
	if !ok {
		return nil // gone from the host since virtual-kubelet looked
	}
	held, err := p.forward(ctx, pod)
	if err == nil || !transient.Is(err) {
		span.SetStatus(err)
		p.cfg.Metrics.created(p.cfg.NodeName, held, err)
		return err
	}
	span.SetStatus(err)
	p.cfg.Metrics.retrying(p.cfg.NodeName)
	log.G(ctx).WithError(err).Info("forwarding failed, will retry")
	p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, EventForwardRetrying,
		"Forwarding to member cluster %s failed, retrying: %v", p.cfg.NodeName, err)
	p.retryQueue.AddRateLimited(key)
	return nil
}

// forward creates the member pod of a host pod, or reports it held: not
// forwarded because an object it needs is missing in the host, which is
// reported on the pod, and forwarded again once the object exists.
func (p *Provider) forward(ctx context.Context, pod *corev1.Pod) (held bool, err error) {
	t := p.target(pod.Namespace)
	if err := p.mirrors.Namespaces.Ensure(ctx, t.Namespace, pod.Namespace); err != nil {
		return false, err
	}
	if ready, err := p.deps.ensure(ctx, pod, t); err != nil || !ready {
		return err == nil, err
	}
	if err := p.mirrors.Claims.Ensure(ctx, pod, t); err != nil {
		return false, err
	}
	src, applied, err := p.override(ctx, pod)
	if err != nil {
		return false, err
	}
	member := translate.ToMember(src, t)
	if err := Confine(member, p.cfg.Partition); err != nil {
		return false, fmt.Errorf("pod %s/%s on virtual cluster %s: %w", pod.Namespace, pod.Name, t.Cluster, err)
	}
	err = kube.CreatePod(ctx, p.cfg.MemberClient, member)
	switch {
	case apierrors.IsAlreadyExists(err):
		if err := p.adopt(ctx, pod, t); err != nil {
			return false, err
		}
	case err != nil:
		return false, fmt.Errorf("create pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
	}
	p.cfg.Metrics.memberPodCreated(p.cfg.NodeName, pod)
	return false, p.recordOverrides(ctx, pod, applied)
}

// adopt takes over a member pod that already exists under the pod's name: it
// is this host pod's after a restart, an earlier host pod's leftover that has
// to go first, or not flotilla's at all, which is reported and left alone.
func (p *Provider) adopt(ctx context.Context, pod *corev1.Pod, t translate.Target) error {
	existing, err := p.cfg.MemberClient.CoreV1().Pods(t.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("member pod %s/%s vanished during adoption: %w", t.Namespace, pod.Name, transient.ErrRetry)
	}
	if err != nil {
		return fmt.Errorf("get pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
	}
	switch {
	case !p.ours(existing) && pod.Annotations[wellknown.AdoptAnnotation] == string(existing.UID) && existing.UID != "" &&
		existing.Annotations[wellknown.AdoptableAnnotation] == pod.Namespace+"/"+pod.Name:
		return p.takeOver(ctx, pod, existing, t)
	case !p.ours(existing):
		return fmt.Errorf("pod %s/%s already exists in cluster %s and is not managed by this flotilla virtual node", t.Namespace, pod.Name, t.Cluster)
	case existing.Labels[wellknown.HostUIDLabel] == string(pod.UID):
		return nil
	}
	if existing.DeletionTimestamp == nil {
		err := p.cfg.MemberClient.CoreV1().Pods(t.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			Preconditions: metav1.NewUIDPreconditions(string(existing.UID)),
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete leftover pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
		}
	}
	return fmt.Errorf("waiting for leftover pod %s/%s of an earlier host pod to terminate: %w", t.Namespace, pod.Name, transient.ErrRetry)
}

// takeOver stamps flotilla's identity on a member pod that was not
// flotilla's, because the host pod names it for adoption: from then on it
// is this host pod's member pod, as if forwarded from it, and it keeps
// running. A pod of another flotilla installation or virtual cluster is
// never taken.
func (p *Provider) takeOver(ctx context.Context, pod, existing *corev1.Pod, t translate.Target) error {
	if v, ok := existing.Labels[wellknown.InstallationLabel]; ok {
		return fmt.Errorf("pod %s/%s in cluster %s cannot be adopted: it belongs to flotilla installation %q, virtual cluster %q", t.Namespace, pod.Name, t.Cluster, v, existing.Labels[wellknown.ClusterLabel])
	}
	if existing.DeletionTimestamp != nil {
		return fmt.Errorf("pod %s/%s in cluster %s cannot be adopted: it is being deleted", t.Namespace, pod.Name, t.Cluster)
	}
	m := existing.DeepCopy()
	m.Labels = t.Owner().Stamp(m.Labels)
	m.Labels[wellknown.HostUIDLabel] = string(pod.UID)
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[wellknown.HostNamespaceAnnotation] = pod.Namespace
	m.Annotations[wellknown.HostNameAnnotation] = pod.Name
	if _, err := p.cfg.MemberClient.CoreV1().Pods(t.Namespace).Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("adopt pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, transient.ErrRetry)
		}
		return fmt.Errorf("adopt pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
	}
	log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("memberUID", existing.UID).Info("adopted a running member pod")
	p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, EventAdopted, "Adopted the running pod %s/%s of cluster %s (uid %s)", t.Namespace, pod.Name, t.Cluster, existing.UID)
	return nil
}

// release hands a member pod back to its cluster: it loses flotilla's
// identity, and with it flotilla's care, and keeps running.
func (p *Provider) release(ctx context.Context, pod *corev1.Pod, memberUID types.UID, t translate.Target) error {
	pods := p.cfg.MemberClient.CoreV1().Pods(t.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != memberUID || !p.ours(cur) {
			return nil // already released, or not this one
		}
		for _, k := range []string{wellknown.ManagedByLabel, wellknown.ClusterLabel, wellknown.InstallationLabel, wellknown.HostUIDLabel} {
			delete(cur.Labels, k)
		}
		for _, k := range []string{wellknown.HostNamespaceAnnotation, wellknown.HostNameAnnotation, wellknown.AdoptAnnotation, wellknown.AdoptableAnnotation, wellknown.ReleaseAnnotation} {
			delete(cur.Annotations, k)
		}
		_, err = pods.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
	}
	log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).Info("released the member pod to its cluster")
	return nil
}

// UpdatePod applies to the member pod what may change on a running pod:
// container images, activeDeadlineSeconds, added tolerations, labels and annotations.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) (err error) {
	ctx, end := p.measured(ctx, "provider.UpdatePod", "update", pod.Namespace+"/"+pod.Name)
	defer end(&err)
	pod, ok := p.whole(pod)
	if !ok {
		return nil // gone from the host since virtual-kubelet looked
	}
	t := p.target(pod.Namespace)
	src, applied, err := p.override(ctx, pod)
	if err != nil {
		return err
	}
	want := translate.ToMember(src, t)
	pods := p.cfg.MemberClient.CoreV1().Pods(t.Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return errdefs.NotFoundf("pod %s/%s not found in cluster %s", t.Namespace, pod.Name, t.Cluster)
		}
		if err != nil {
			return err
		}
		if !p.ours(cur) || cur.Labels[wellknown.HostUIDLabel] != string(pod.UID) {
			return errdefs.NotFoundf("pod %s/%s in cluster %s belongs to another host pod", t.Namespace, pod.Name, t.Cluster)
		}
		upd := cur.DeepCopy()
		if !applyMutable(upd, want) {
			return nil
		}
		_, err = pods.Update(ctx, upd, metav1.UpdateOptions{})
		if err == nil {
			p.mirrors.Services.PodChanged(pod.Namespace) // labels may now match other Services
		}
		return err
	})
	if err != nil {
		return err
	}
	return p.recordOverrides(ctx, pod, applied)
}

// applyMutable copies the updatable fields of want into cur and reports
// whether anything changed.
func applyMutable(cur, want *corev1.Pod) bool {
	before := cur.DeepCopy()
	cur.Labels = want.Labels
	cur.Annotations = want.Annotations
	translate.CopyImages(cur.Spec.Containers, want.Spec.Containers)
	translate.CopyImages(cur.Spec.InitContainers, want.Spec.InitContainers)
	cur.Spec.ActiveDeadlineSeconds = want.Spec.ActiveDeadlineSeconds
	for _, t := range want.Spec.Tolerations {
		if !hasToleration(cur.Spec.Tolerations, t) {
			cur.Spec.Tolerations = append(cur.Spec.Tolerations, t)
		}
	}
	return !equality.Semantic.DeepEqual(before, cur)
}

func hasToleration(ts []corev1.Toleration, t corev1.Toleration) bool {
	for _, x := range ts {
		if equality.Semantic.DeepEqual(x, t) {
			return true
		}
	}
	return false
}

// DeletePod deletes the member pod with the host pod's grace period. It may
// be called many times — virtual-kubelet calls it again when the grace
// period shortens, as it does when the host pod's deletion is finished — so
// it works from the member pod cache and writes only what is still to do:
// nothing while the member pod terminates with no longer a grace period than
// asked for; the host pod's deletion is finished once the member pod is gone.
// A member pod the cache has not shown yet is left to the orphan check,
// which deletes it as soon as it appears without its host pod. It reports
// success rather than NotFound for a pod already gone, because
// virtual-kubelet records every error, NotFound included, as a
// ProviderDeleteFailed warning on the host pod.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) (err error) {
	ctx, end := p.measured(ctx, "provider.DeletePod", "delete", pod.Namespace+"/"+pod.Name)
	defer end(&err)
	// A view gone from the cache still names the pod, its grace period
	// and its marks: all that deleting needs.
	pod, _ = p.whole(pod)
	t := p.target(pod.Namespace)
	member, err := p.memberPods.Get(t.Namespace, pod.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	// The mark is looked for on the member pod too, which UpdatePod gave
	// it: a host pod removed at once reaches DeletePod as virtual-kubelet
	// last saw it, which may be before the mark.
	release := pod.Annotations[wellknown.ReleaseAnnotation] == "true" || (member != nil && member.Annotations[wellknown.ReleaseAnnotation] == "true")
	if err == nil && p.ours(member) && member.HostUID == pod.UID && release && member.DeletionTimestamp == nil {
		if err := p.release(ctx, pod, member.UID, t); err != nil {
			return err
		}
		p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, EventReleased, "Released pod %s/%s to cluster %s, where it keeps running", t.Namespace, pod.Name, t.Cluster)
		if pod.DeletionTimestamp != nil && ptr.Deref(pod.DeletionGracePeriodSeconds, 1) != 0 {
			return p.deleteHostPod(ctx, pod)
		}
		return nil
	}
	if err == nil && p.ours(member) && member.HostUID == pod.UID {
		if (member.DeletionTimestamp != nil && !shorterGrace(pod.DeletionGracePeriodSeconds, member.DeletionGracePeriodSeconds)) ||
			p.deleteAsked(member, pod.DeletionGracePeriodSeconds) {
			return nil // terminating; syncStatus finishes the host pod once it is gone
		}
		err := kube.DeletePod(ctx, p.cfg.MemberClient, t.Namespace, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Preconditions:      metav1.NewUIDPreconditions(string(member.UID)),
		})
		if err == nil {
			p.deleting.Store(member.UID, pod.DeletionGracePeriodSeconds)
			return nil
		}
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			if transient.Is(err) {
				p.waitingForCluster(pod, t)
			}
			return fmt.Errorf("delete pod %s/%s in cluster %s: %w", t.Namespace, pod.Name, t.Cluster, err)
		}
	}
	// The member pod is gone. Finish the host pod's deletion as a kubelet
	// does, unless it is already being removed at once.
	if pod.DeletionTimestamp != nil && ptr.Deref(pod.DeletionGracePeriodSeconds, 1) != 0 {
		return p.deleteHostPod(ctx, pod)
	}
	return nil
}

// EventWaitingForCluster: a host pod being deleted stays Terminating
// because its member cannot be reached to stop the member pod.
const EventWaitingForCluster = "WaitingForCluster"

// waitingForCluster says, on a host pod whose deletion cannot reach its
// member, why it stays Terminating: as for a pod on an unreachable node,
// nobody can tell that its member copy stopped, so no replacement of a
// StatefulSet pod starts (never two copies), and a pod with claims keeps
// waiting for the cluster holding its data.
func (p *Provider) waitingForCluster(pod *corev1.Pod, t translate.Target) {
	msg := fmt.Sprintf("Cluster %s cannot be reached, so its copy of this pod cannot be stopped or seen to stop: "+
		"the pod stays Terminating until the cluster answers, and its controller makes no replacement for a StatefulSet pod meanwhile", t.Cluster)
	if claims := mirror.PodClaimNames(pod); len(claims) > 0 {
		msg += fmt.Sprintf(". Its data (claim %s) is in that cluster; to start afresh elsewhere without it, "+
			"delete the claim and force-delete this pod (kubectl delete pod --force), accepting that the old copy may still run there", strings.Join(claims, ", "))
	}
	p.cfg.Recorder.Event(pod, corev1.EventTypeWarning, EventWaitingForCluster, msg)
}

// PodEventFilter is virtual-kubelet's PodEventFilterFunc. It hides a host
// pod whose deletion is already being finished (grace period 0) and whose
// member pod is gone, since virtual-kubelet has nothing left to do for it:
// the informer's filtering handler turns the update that shortened the
// grace period into a delete, so virtual-kubelet forgets the pod at once
// instead of comparing it in full with its last spec (a millisecond of CPU
// per pod) and calling DeletePod again.
func (p *Provider) PodEventFilter(_ context.Context, pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil || ptr.Deref(pod.DeletionGracePeriodSeconds, 1) != 0 {
		return true
	}
	member, err := p.memberPods.Get(p.target(pod.Namespace).Namespace, pod.Name)
	return err == nil && p.ours(member) && member.HostUID == pod.UID
}

// shorterGrace reports whether grace period a is shorter than b; nil is the
// pod's default, never shorter.
func shorterGrace(a, b *int64) bool {
	return a != nil && (b == nil || *a < *b)
}

// GetPod returns the member pod in host terms (see translate.HostView), as the view
// virtual-kubelet compares with the pods its lister gives it (podcache.VirtualKubeletView), or
// a NotFound error when this host pod has no member pod.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	t := p.target(namespace)
	member, err := p.memberPods.Get(t.Namespace, name)
	if apierrors.IsNotFound(err) || (err == nil && !p.ours(member)) {
		return nil, errdefs.NotFoundf("pod %s/%s not found in cluster %s", t.Namespace, name, t.Cluster)
	}
	if err != nil {
		return nil, err
	}
	host, err := p.hostPods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return orphanView(member), nil
	}
	if err != nil {
		return nil, err
	}
	if member.HostUID != host.UID {
		return nil, errdefs.NotFoundf("pod %s/%s in cluster %s belongs to another host pod", t.Namespace, name, t.Cluster)
	}
	return podcache.VirtualKubeletView(translate.HostView(host, member, t)), nil
}

// orphanView names a member pod whose host pod is gone by its host
// coordinates, so virtual-kubelet can ask for its deletion.
func orphanView(m *memberpod.Pod) *corev1.Pod {
	ns, name := podcache.HostKeyOf(m)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: ns,
			UID:       m.HostUID,
		},
		Status: *m.Status.DeepCopy(),
	}
}

// GetPodStatus returns the status GetPod would.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every member pod this virtual node forwarded, in host
// terms (translate.HostView), whole: the kubelet API's pod list shows them as
// GetPod's views would not, with their containers and tolerations.
func (p *Provider) GetPods(_ context.Context) ([]*corev1.Pod, error) {
	members, err := p.memberPods.List(p.ownSelector())
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(members))
	for _, m := range members {
		ns, name := podcache.HostKeyOf(m)
		host, err := p.hostPods.Pods(ns).Get(name)
		if err != nil || host.UID != m.HostUID {
			out = append(out, orphanView(m))
			continue
		}
		out = append(out, translate.HostView(host, m, p.target(ns)))
	}
	return out, nil
}

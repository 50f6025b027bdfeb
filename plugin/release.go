package plugin

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// Release hands a host Deployment or StatefulSet whose pods all run in
// one cluster back to that member cluster, deleting no pod: the member
// gets the workload (and ReplicaSet) owning the running pods, flotilla's
// identity leaves them, and the host's objects go. The emergency way back
// from adopt. Each step finds what an interrupted run did.
func Release(ctx context.Context, o *AdoptOptions) error {
	switch strings.ToLower(o.Kind) {
	case "deployment", "deployments", "deploy":
		return releaseDeployment(ctx, o)
	case "statefulset", "statefulsets", "sts":
		return releaseStatefulSet(ctx, o)
	}
	return fmt.Errorf("release %s/%s: want deployment/NAME or statefulset/NAME", o.Kind, o.Name)
}

// releasePods lists the host pods of a workload, all of which must run in
// the cluster, and the member pod each stands for.
func releasePods(ctx context.Context, o *AdoptOptions, vn *clusterTarget, sel *metav1.LabelSelector, owned func(*corev1.Pod) bool) ([]corev1.Pod, []corev1.Pod, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, nil, err
	}
	list, err := o.Host.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.String()})
	if err != nil {
		return nil, nil, err
	}
	var hostPods, memberPods []corev1.Pod
	var refusals []string
	for _, h := range list.Items {
		if !owned(&h) {
			continue
		}
		switch {
		case h.Spec.NodeName != o.Cluster:
			refusals = append(refusals, fmt.Sprintf("pod %s runs on %q, not in cluster %s", h.Name, h.Spec.NodeName, o.Cluster))
			continue
		case h.DeletionTimestamp != nil && h.Annotations[wellknown.ReleaseAnnotation] != "true":
			refusals = append(refusals, fmt.Sprintf("pod %s is being deleted", h.Name))
			continue
		}
		m, err := o.Member.CoreV1().Pods(vn.memberNS).Get(ctx, h.Name, metav1.GetOptions{})
		if err != nil {
			refusals = append(refusals, fmt.Sprintf("pod %s has no member pod %s/%s: %v", h.Name, vn.memberNS, h.Name, err))
			continue
		}
		if m.Labels[wellknown.HostUIDLabel] != string(h.UID) && m.Labels[wellknown.HostUIDLabel] != "" {
			refusals = append(refusals, fmt.Sprintf("member pod %s/%s stands for another host pod", vn.memberNS, h.Name))
			continue
		}
		hostPods, memberPods = append(hostPods, h), append(memberPods, *m)
	}
	if len(refusals) > 0 {
		return nil, nil, fmt.Errorf("release %s/%s to cluster %s refused:\n  - %s", o.Kind, o.Name, o.Cluster, strings.Join(refusals, "\n  - "))
	}
	return hostPods, memberPods, nil
}

func releaseDeployment(ctx context.Context, o *AdoptOptions) error {
	vn, err := lookupCluster(ctx, o.Host, o.Cluster, o.Namespace)
	if err != nil {
		return err
	}
	from := "host/" + o.Namespace + "/" + o.Name
	hd, err := o.Host.AppsV1().Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if md, merr := o.Member.AppsV1().Deployments(vn.memberNS).Get(ctx, o.Name, metav1.GetOptions{}); merr == nil && md.Annotations[wellknown.ReleasedFromAnnotation] == from {
			return finishHostRelease(ctx, o, vn.memberNS, nil, "")
		}
	}
	if err != nil {
		return fmt.Errorf("host Deployment: %w", err)
	}
	rs, err := activeReplicaSet(ctx, o.Host, hd, "release")
	if err != nil {
		return err
	}
	hostPods, memberPods, err := releasePods(ctx, o, vn, rs.Spec.Selector, controlledBy(rs.UID))
	if err != nil {
		return err
	}
	if int32(len(hostPods)) != ptr.Deref(rs.Spec.Replicas, 0) {
		return fmt.Errorf("release deployment/%s refused: %d of its %d pods run; release it once they all do", o.Name, len(hostPods), ptr.Deref(rs.Spec.Replicas, 0))
	}
	tpl, err := memberTemplate(rs.Spec.Template, o.Cluster)
	if err != nil {
		return err
	}
	dTpl, err := memberTemplate(hd.Spec.Template, o.Cluster)
	if err != nil {
		return err
	}
	o.say("Release deployment %s/%s to cluster %s (member namespace %s), deleting no pod:", o.Namespace, o.Name, o.Cluster, vn.memberNS)
	o.say("  create in the member: ReplicaSet %s owning the %d running pods, Deployment %s", rs.Name, len(memberPods), o.Name)
	o.say("  delete in the host: Deployment %s, ReplicaSet %s and their %d pods, whose member pods flotilla lets go", o.Name, rs.Name, len(hostPods))
	if o.DryRun == "client" {
		return nil
	}
	if o.DryRun == "server" {
		mrs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: rs.Name, Namespace: vn.memberNS, Labels: rs.Labels}, Spec: *rs.Spec.DeepCopy()}
		mrs.Spec.Template = tpl
		_, err := o.Member.AppsV1().ReplicaSets(vn.memberNS).Create(ctx, mrs, metav1.CreateOptions{DryRun: o.dryRun()})
		return err
	}

	// The member ReplicaSet adopts the member pods (they have no owner
	// there); pods it might make before it sees them are gated and
	// deleted as surplus.
	mrs, err := o.Member.AppsV1().ReplicaSets(vn.memberNS).Get(ctx, rs.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		gated := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: rs.Name, Namespace: vn.memberNS, Labels: rs.Labels,
			Annotations: map[string]string{wellknown.ReleasedFromAnnotation: from}}, Spec: *rs.Spec.DeepCopy()}
		gated.Spec.Replicas = ptr.To(int32(len(memberPods)))
		gated.Spec.Template = *tpl.DeepCopy()
		gated.Spec.Template.Spec.SchedulingGates = append(gated.Spec.Template.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: wellknown.AdoptingGate})
		if mrs, err = o.Member.AppsV1().ReplicaSets(vn.memberNS).Create(ctx, gated, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("member ReplicaSet: %w", err)
		}
	case err != nil:
		return err
	case mrs.Annotations[wellknown.ReleasedFromAnnotation] != from:
		return fmt.Errorf("ReplicaSet %s/%s already exists in the member and was not made by a release of %s", vn.memberNS, rs.Name, from)
	}
	if err := waitOwned(ctx, o, vn.memberNS, rs.Spec.Selector, memberPods, mrs.UID); err != nil {
		return err
	}
	if err := ungate(ctx, o.Member, vn.memberNS, rs.Name, tpl); err != nil {
		return fmt.Errorf("member ReplicaSet: %w", err)
	}
	md := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: vn.memberNS, Labels: hd.Labels,
		Annotations: map[string]string{wellknown.ReleasedFromAnnotation: from}}, Spec: *hd.Spec.DeepCopy()}
	md.Spec.Template = dTpl
	md.Spec.Replicas = ptr.To(int32(len(memberPods)))
	if err := createOwning(ctx, o.Member, md); err != nil {
		return fmt.Errorf("member Deployment: %w", err)
	}
	if err := waitOwnsOnly(ctx, o.Member, vn.memberNS, o.Name, rs.Name); err != nil {
		return err
	}
	o.say("member Deployment %s/%s owns ReplicaSet %s and the %d running pods", vn.memberNS, o.Name, rs.Name, len(memberPods))
	return finishHostRelease(ctx, o, vn.memberNS, hd, rs.Name)
}

// waitOwned waits until member workload uid owns each member pod and no
// pod of its own creation.
func waitOwned(ctx context.Context, o *AdoptOptions, ns string, sel *metav1.LabelSelector, pods []corev1.Pod, uid types.UID) error {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return err
	}
	want := map[types.UID]bool{}
	for _, p := range pods {
		want[p.UID] = true
	}
	return waitFor(ctx, "the member workload to own the running pods, and no others", func(ctx context.Context) (bool, string, error) {
		list, err := o.Member.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.String()})
		if err != nil {
			return false, err.Error(), nil
		}
		owned, extra := 0, 0
		for _, p := range list.Items {
			if c := metav1.GetControllerOf(&p); c != nil && c.UID == uid {
				if want[p.UID] {
					owned++
				} else {
					extra++
				}
			}
		}
		return owned == len(pods) && extra == 0, fmt.Sprintf("%d running pods owned, %d others", owned, extra), nil
	})
}

// finishHostRelease removes the host's objects: the workload and
// ReplicaSet (orphaning), then each host pod marked for release, so that
// flotilla-node lets its member pod go rather than delete it.
func finishHostRelease(ctx context.Context, o *AdoptOptions, memberNS string, workload metav1.Object, rsName string) error {
	sel := metav1.ListOptions{}
	pods, err := o.Host.CoreV1().Pods(o.Namespace).List(ctx, sel)
	if err != nil {
		return err
	}
	var mine []corev1.Pod
	for _, p := range pods.Items {
		c := metav1.GetControllerOf(&p)
		switch {
		case p.Spec.NodeName != o.Cluster:
		case workload != nil && c != nil && (c.UID == workload.GetUID() || (c.Kind == "ReplicaSet" && c.Name == rsName)):
			mine = append(mine, p)
		case p.Annotations[wellknown.ReleaseAnnotation] == "true":
			mine = append(mine, p)
		}
	}
	for _, p := range mine {
		if p.Annotations[wellknown.ReleaseAnnotation] == "true" {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, wellknown.ReleaseAnnotation)
		if _, err := o.Host.CoreV1().Pods(o.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("mark host pod %s for release: %w", p.Name, err)
		}
	}
	// flotilla-node passes the mark on to the member pods; waiting for it
	// there makes sure it has seen it before any deletion.
	if err := waitFor(ctx, "flotilla-node to see the release marks", func(ctx context.Context) (bool, string, error) {
		for _, p := range mine {
			m, err := o.Member.CoreV1().Pods(memberNS).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, "", fmt.Errorf("member pod %s/%s is gone", memberNS, p.Name)
			}
			if err != nil {
				return false, err.Error(), nil
			}
			if m.Annotations[wellknown.ReleaseAnnotation] != "true" && m.Labels[wellknown.InstallationLabel] != "" {
				return false, "member pod " + p.Name + " not marked yet", nil
			}
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	if workload != nil {
		var del func(context.Context, metav1.DeleteOptions) error
		switch w := workload.(type) {
		case *appsv1.Deployment:
			del = func(ctx context.Context, opts metav1.DeleteOptions) error {
				return o.Host.AppsV1().Deployments(o.Namespace).Delete(ctx, w.Name, opts)
			}
		case *appsv1.StatefulSet:
			del = func(ctx context.Context, opts metav1.DeleteOptions) error {
				return o.Host.AppsV1().StatefulSets(o.Namespace).Delete(ctx, w.Name, opts)
			}
		}
		if err := orphanDelete(ctx, "host workload", del, workload.GetUID()); err != nil {
			return err
		}
	}
	if rsName != "" {
		if rs, err := o.Host.AppsV1().ReplicaSets(o.Namespace).Get(ctx, rsName, metav1.GetOptions{}); err == nil {
			if err := waitFor(ctx, "the host ReplicaSet to be orphaned", func(ctx context.Context) (bool, string, error) {
				cur, err := o.Host.AppsV1().ReplicaSets(o.Namespace).Get(ctx, rsName, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, "", nil
				}
				if err != nil {
					return false, err.Error(), nil
				}
				return metav1.GetControllerOf(cur) == nil, "still owned", nil
			}); err != nil {
				return err
			}
			if err := orphanDelete(ctx, "host ReplicaSet", func(ctx context.Context, opts metav1.DeleteOptions) error {
				return o.Host.AppsV1().ReplicaSets(o.Namespace).Delete(ctx, rsName, opts)
			}, rs.UID); err != nil {
				return err
			}
		}
	}
	// Once no controller owns them, the host pods are deleted; each
	// carries the release mark, which flotilla-node honours.
	if err := waitFor(ctx, "the host pods to be orphaned", func(ctx context.Context) (bool, string, error) {
		for _, p := range mine {
			cur, err := o.Host.CoreV1().Pods(o.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return false, err.Error(), nil
			}
			if metav1.GetControllerOf(cur) != nil {
				return false, "pod " + p.Name + " still owned", nil
			}
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	for _, p := range mine {
		// Gracefully, whatever the pod's own grace period: a pod removed at
		// once would reach flotilla-node without its mark.
		if err := o.Host.CoreV1().Pods(o.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30),
			Preconditions: metav1.NewUIDPreconditions(string(p.UID))}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete host pod %s: %w", p.Name, err)
		}
	}
	if err := waitFor(ctx, "flotilla-node to let the member pods go, and the host pods to go", func(ctx context.Context) (bool, string, error) {
		for _, p := range mine {
			if _, err := o.Host.CoreV1().Pods(o.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, "host pod " + p.Name + " still there", nil
			}
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	o.say("host objects deleted; the %d member pods run on, their cluster's again", len(mine))
	return nil
}

func releaseStatefulSet(ctx context.Context, o *AdoptOptions) error {
	vn, err := lookupCluster(ctx, o.Host, o.Cluster, o.Namespace)
	if err != nil {
		return err
	}
	from := "host/" + o.Namespace + "/" + o.Name
	hs, err := o.Host.AppsV1().StatefulSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if ms, merr := o.Member.AppsV1().StatefulSets(vn.memberNS).Get(ctx, o.Name, metav1.GetOptions{}); merr == nil && ms.Annotations[wellknown.ReleasedFromAnnotation] == from {
			return finishHostRelease(ctx, o, vn.memberNS, nil, "")
		}
	}
	if err != nil {
		return fmt.Errorf("host StatefulSet: %w", err)
	}
	if len(hs.Spec.VolumeClaimTemplates) > 0 {
		return fmt.Errorf("release statefulset/%s refused: its claims would stay the host's; release does not hand claims back yet", o.Name)
	}
	hostPods, memberPods, err := releasePods(ctx, o, vn, hs.Spec.Selector, controlledBy(hs.UID))
	if err != nil {
		return err
	}
	tpl, err := memberTemplate(hs.Spec.Template, o.Cluster)
	if err != nil {
		return err
	}
	o.say("Release statefulset %s/%s to cluster %s (member namespace %s), deleting no pod:", o.Namespace, o.Name, o.Cluster, vn.memberNS)
	o.say("  create in the member: StatefulSet %s owning the %d running pods", o.Name, len(memberPods))
	o.say("  delete in the host: StatefulSet %s and its %d pods, whose member pods flotilla lets go", o.Name, len(hostPods))
	if o.DryRun == "client" {
		return nil
	}
	ms := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: vn.memberNS, Labels: hs.Labels,
		Annotations: map[string]string{wellknown.ReleasedFromAnnotation: from}}, Spec: *hs.Spec.DeepCopy()}
	ms.Spec.Template = tpl
	strategy := ms.Spec.UpdateStrategy
	ms.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	if o.DryRun == "server" {
		_, err := o.Member.AppsV1().StatefulSets(vn.memberNS).Create(ctx, ms, metav1.CreateOptions{DryRun: o.dryRun()})
		return err
	}
	cur, err := o.Member.AppsV1().StatefulSets(vn.memberNS).Create(ctx, ms, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if cur, err = o.Member.AppsV1().StatefulSets(vn.memberNS).Get(ctx, o.Name, metav1.GetOptions{}); err == nil && cur.Annotations[wellknown.ReleasedFromAnnotation] != from {
			return fmt.Errorf("StatefulSet %s/%s already exists in the member and was not made by a release of %s", vn.memberNS, o.Name, from)
		}
	}
	if err != nil {
		return fmt.Errorf("member StatefulSet: %w", err)
	}
	if err := waitOwned(ctx, o, vn.memberNS, hs.Spec.Selector, memberPods, cur.UID); err != nil {
		return err
	}
	if err := waitFor(ctx, "the member StatefulSet's revision", func(ctx context.Context) (bool, string, error) {
		cur, err = o.Member.AppsV1().StatefulSets(vn.memberNS).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return cur.Status.UpdateRevision != "", "", nil
	}); err != nil {
		return err
	}
	// Released first, so that flotilla-node does not put the host's
	// revision back on the member pods.
	if err := finishHostRelease(ctx, o, vn.memberNS, hs, ""); err != nil {
		return err
	}
	for _, m := range memberPods {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, appsv1.ControllerRevisionHashLabelKey, cur.Status.UpdateRevision)
		if _, err := o.Member.CoreV1().Pods(vn.memberNS).Patch(ctx, m.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("member pod %s: %w", m.Name, err)
		}
	}
	if strategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		if err := waitFor(ctx, "the member StatefulSet to count its pods at its revision", func(ctx context.Context) (bool, string, error) {
			cur, err = o.Member.AppsV1().StatefulSets(vn.memberNS).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			return cur.Status.UpdatedReplicas == int32(len(memberPods)), fmt.Sprintf("%d updated", cur.Status.UpdatedReplicas), nil
		}); err != nil {
			return err
		}
		if err := setStrategy(ctx, o.Member, vn.memberNS, o.Name, strategy); err != nil {
			return fmt.Errorf("member StatefulSet update strategy: %w", err)
		}
	}
	o.say("member StatefulSet %s/%s owns the %d running pods", vn.memberNS, o.Name, len(memberPods))
	return nil
}

func newReleaseCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	return workloadCommand(flags, streams, "release", "Hand a workload back to the member cluster it runs in, deleting no pod",
		`Hand a host Deployment or StatefulSet whose pods all run in one member
cluster back to that member: the member gets the workload (and ReplicaSet)
owning the running pods, flotilla lets the pods go, and the host's objects
are deleted. No pod is deleted or restarted. The way back from adopt, and
the emergency fallback when the host is to be bypassed.`, Release)
}

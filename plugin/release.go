package plugin

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

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

// finishHostRelease removes the host's objects: owners (orphaning; nil
// when an earlier run deleted them), then each host pod marked for
// release, so that flotilla-node lets its member pod go rather than
// delete it.
func finishHostRelease(ctx context.Context, o *AdoptOptions, memberNS string, owners *hostOwners) error {
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
		case owners != nil && c != nil && (c.UID == owners.uid || (owners.replicaSet != "" && c.Kind == "ReplicaSet" && c.Name == owners.replicaSet)):
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
	if owners != nil {
		if err := orphanDelete(ctx, "host workload", owners.del, owners.uid); err != nil {
			return err
		}
	}
	if rsName := owners.replicaSetName(); rsName != "" {
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

func newReleaseCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	return workloadCommand(flags, streams, "release", "Hand a workload back to the member cluster it runs in, deleting no pod",
		`Hand a host Deployment or StatefulSet whose pods all run in one member
cluster back to that member: the member gets the workload (and ReplicaSet)
owning the running pods, flotilla lets the pods go, and the host's objects
are deleted. No pod is deleted or restarted. The way back from adopt, and
the emergency fallback when the host is to be bypassed.`, Release)
}

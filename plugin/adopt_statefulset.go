// What adopt and release do differently for a StatefulSet: it owns its
// pods itself, is created with OnDelete so that no pod is replaced for
// carrying the other cluster's revision, and gets its update strategy
// back once the pods carry its own.

package plugin

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"flotilla.io/flotilla/internal/wellknown"
)

func init() {
	registerKind(func(o *AdoptOptions) workloadKind { return &statefulSetKind{o: o} }, "statefulset", "statefulsets", "sts")
}

// statefulSetKind is one adoption or release of a StatefulSet.
type statefulSetKind struct {
	o *AdoptOptions
	// s is the StatefulSet where it runs now: the member's for adopt, the
	// host's for release.
	s *appsv1.StatefulSet
	// created is what adopt creates in the host, or release in the
	// member, with the OnDelete strategy; strategy is the one it gets
	// back at the end.
	created  *appsv1.StatefulSet
	strategy appsv1.StatefulSetUpdateStrategy
	// from names the host StatefulSet a release comes from, and revision
	// is the member StatefulSet's.
	from, revision string
}

var _ workloadKind = (*statefulSetKind)(nil)

func (k *statefulSetKind) kind() string { return "StatefulSet" }

func (k *statefulSetKind) readMember(ctx context.Context, ns string) (*podSource, error) {
	o := k.o
	s, err := o.Member.AppsV1().StatefulSets(ns).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("member StatefulSet: %w", err)
	}
	if len(s.Spec.VolumeClaimTemplates) > 0 {
		return nil, fmt.Errorf("adopt statefulset/%s refused: its volumeClaimTemplates make PersistentVolumeClaims, which adopt does not bring into the host yet", o.Name)
	}
	if s.Status.CurrentRevision != s.Status.UpdateRevision {
		return nil, fmt.Errorf("adopt statefulset/%s refused: a rollout is underway (revision %s to %s); adopt it once it is done", o.Name, s.Status.CurrentRevision, s.Status.UpdateRevision)
	}
	k.s = s
	return &podSource{template: &s.Spec.Template, selector: s.Spec.Selector, owned: controlledBy(s.UID)}, nil
}

// onDelete is s with OnDelete until the pods carry its own revision: a
// rolling update would replace every pod whose revision is the other
// cluster's. It remembers the strategy to give back.
func (k *statefulSetKind) onDelete(s *appsv1.StatefulSet) *appsv1.StatefulSet {
	k.strategy = s.Spec.UpdateStrategy
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	return s
}

func (k *statefulSetKind) planHost(p *plan) ([]string, []string, error) {
	o, s := k.o, k.s
	hostS := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: o.Namespace, Labels: s.Labels,
		Annotations: map[string]string{wellknown.AdoptedFromAnnotation: o.adoptedFrom(p)}}, Spec: *s.Spec.DeepCopy()}
	var err error
	if hostS.Spec.Template, err = hostTemplate(s.Spec.Template, o.Cluster); err != nil {
		return nil, nil, err
	}
	k.created = k.onDelete(hostS)
	return []string{"StatefulSet " + s.Name}, []string{"StatefulSet " + s.Name}, nil
}

func (k *statefulSetKind) hostWorkload(ctx context.Context) *metav1.ObjectMeta {
	if cur, err := k.o.Host.AppsV1().StatefulSets(k.o.Namespace).Get(ctx, k.o.Name, metav1.GetOptions{}); err == nil {
		return &cur.ObjectMeta
	}
	return nil
}

func (k *statefulSetKind) validateHost(ctx context.Context, _ *plan) error {
	_, err := k.o.Host.AppsV1().StatefulSets(k.o.Namespace).Create(ctx, k.created, metav1.CreateOptions{DryRun: k.o.dryRun()})
	return err
}

func (k *statefulSetKind) takeOver(ctx context.Context, p *plan) error {
	o, s := k.o, k.s
	if _, err := o.Host.AppsV1().StatefulSets(o.Namespace).Create(ctx, k.created, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("host StatefulSet: %w", err)
	}
	var hs *appsv1.StatefulSet
	if err := waitFor(ctx, "the host StatefulSet to own the adopted pods", func(ctx context.Context) (bool, string, error) {
		var err error
		hs, err = o.Host.AppsV1().StatefulSets(o.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if hs.Status.UpdateRevision == "" {
			return false, "no revision yet", nil
		}
		for _, m := range p.pods {
			h, err := o.Host.CoreV1().Pods(o.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			if c := metav1.GetControllerOf(h); c == nil || c.UID != hs.UID {
				return false, "pod " + m.Name + " not owned yet", nil
			}
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	// The member's StatefulSet goes first: it would replace any pod whose
	// revision label it does not know.
	if err := orphanDelete(ctx, "StatefulSet", func(ctx context.Context, opts metav1.DeleteOptions) error {
		return o.Member.AppsV1().StatefulSets(s.Namespace).Delete(ctx, s.Name, opts)
	}, s.UID); err != nil {
		return err
	}
	if err := waitOrphaned(ctx, o.Member, p.vn.memberNS, p.pods, s.UID); err != nil {
		return err
	}
	o.say("member StatefulSet deleted, its %d pods orphaned", len(p.pods))
	// The pods carry the host's revision from now on (flotilla-node passes
	// the label on to the member pods), so the user's update strategy
	// applies to changes made from the host only.
	for _, m := range p.pods {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, appsv1.ControllerRevisionHashLabelKey, hs.Status.UpdateRevision)
		if _, err := o.Host.CoreV1().Pods(o.Namespace).Patch(ctx, m.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("host pod %s: %w", m.Name, err)
		}
	}
	if err := waitFor(ctx, "the host StatefulSet to count its pods at its revision", func(ctx context.Context) (bool, string, error) {
		var err error
		hs, err = o.Host.AppsV1().StatefulSets(o.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return hs.Status.UpdatedReplicas == int32(len(p.pods)), fmt.Sprintf("%d of %d updated", hs.Status.UpdatedReplicas, len(p.pods)), nil
	}); err != nil {
		return err
	}
	if err := setStrategy(ctx, o.Host, o.Namespace, s.Name, k.strategy); err != nil {
		return fmt.Errorf("host StatefulSet update strategy: %w", err)
	}
	o.say("host StatefulSet %s/%s owns the adopted pods, which run on", o.Namespace, s.Name)
	return nil
}

func (k *statefulSetKind) readHost(ctx context.Context, vn *clusterTarget, from string) (*podSource, error) {
	o := k.o
	hs, err := o.Host.AppsV1().StatefulSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if ms, merr := o.Member.AppsV1().StatefulSets(vn.memberNS).Get(ctx, o.Name, metav1.GetOptions{}); merr == nil && ms.Annotations[wellknown.ReleasedFromAnnotation] == from {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("host StatefulSet: %w", err)
	}
	if len(hs.Spec.VolumeClaimTemplates) > 0 {
		return nil, fmt.Errorf("release statefulset/%s refused: its claims would stay the host's; release does not hand claims back yet", o.Name)
	}
	k.s, k.from = hs, from
	return &podSource{template: &hs.Spec.Template, selector: hs.Spec.Selector, owned: controlledBy(hs.UID)}, nil
}

func (k *statefulSetKind) planMember(vn *clusterTarget, hostPods, memberPods []corev1.Pod) ([]string, error) {
	o, hs := k.o, k.s
	tpl, err := memberTemplate(hs.Spec.Template, o.Cluster)
	if err != nil {
		return nil, err
	}
	ms := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: vn.memberNS, Labels: hs.Labels,
		Annotations: map[string]string{wellknown.ReleasedFromAnnotation: k.from}}, Spec: *hs.Spec.DeepCopy()}
	ms.Spec.Template = tpl
	k.created = k.onDelete(ms)
	return []string{
		fmt.Sprintf("create in the member: StatefulSet %s owning the %d running pods", o.Name, len(memberPods)),
		fmt.Sprintf("delete in the host: StatefulSet %s and its %d pods, whose member pods flotilla lets go", o.Name, len(hostPods)),
	}, nil
}

func (k *statefulSetKind) validateMember(ctx context.Context, vn *clusterTarget) error {
	_, err := k.o.Member.AppsV1().StatefulSets(vn.memberNS).Create(ctx, k.created, metav1.CreateOptions{DryRun: k.o.dryRun()})
	return err
}

func (k *statefulSetKind) takeBack(ctx context.Context, vn *clusterTarget, from string, memberPods []corev1.Pod) error {
	o, hs := k.o, k.s
	cur, err := o.Member.AppsV1().StatefulSets(vn.memberNS).Create(ctx, k.created, metav1.CreateOptions{})
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
	return waitFor(ctx, "the member StatefulSet's revision", func(ctx context.Context) (bool, string, error) {
		cur, err = o.Member.AppsV1().StatefulSets(vn.memberNS).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		k.revision = cur.Status.UpdateRevision
		return cur.Status.UpdateRevision != "", "", nil
	})
}

func (k *statefulSetKind) hostOwners() *hostOwners {
	o, hs := k.o, k.s
	return &hostOwners{uid: hs.UID, del: func(ctx context.Context, opts metav1.DeleteOptions) error {
		return o.Host.AppsV1().StatefulSets(o.Namespace).Delete(ctx, hs.Name, opts)
	}}
}

// settleMember relabels the member pods with the member StatefulSet's
// revision once the host's objects are gone (before, flotilla-node would
// put the host's revision back), then gives it its update strategy.
func (k *statefulSetKind) settleMember(ctx context.Context, vn *clusterTarget, memberPods []corev1.Pod) error {
	o := k.o
	for _, m := range memberPods {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, appsv1.ControllerRevisionHashLabelKey, k.revision)
		if _, err := o.Member.CoreV1().Pods(vn.memberNS).Patch(ctx, m.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("member pod %s: %w", m.Name, err)
		}
	}
	if k.strategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		if err := waitFor(ctx, "the member StatefulSet to count its pods at its revision", func(ctx context.Context) (bool, string, error) {
			cur, err := o.Member.AppsV1().StatefulSets(vn.memberNS).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			return cur.Status.UpdatedReplicas == int32(len(memberPods)), fmt.Sprintf("%d updated", cur.Status.UpdatedReplicas), nil
		}); err != nil {
			return err
		}
		if err := setStrategy(ctx, o.Member, vn.memberNS, o.Name, k.strategy); err != nil {
			return fmt.Errorf("member StatefulSet update strategy: %w", err)
		}
	}
	o.say("member StatefulSet %s/%s owns the %d running pods", vn.memberNS, o.Name, len(memberPods))
	return nil
}

// setStrategy gives StatefulSet ns/name the update strategy, if it has
// OnDelete, which adopt and release create it with.
func setStrategy(ctx context.Context, c kubernetes.Interface, ns, name string, strategy appsv1.StatefulSetUpdateStrategy) error {
	if strategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
			return nil
		}
		cur.Spec.UpdateStrategy = strategy
		_, err = c.AppsV1().StatefulSets(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

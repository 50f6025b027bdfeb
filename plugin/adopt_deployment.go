// What adopt and release do differently for a Deployment: its pods belong
// to its one active ReplicaSet, which is moved along with it, gated
// until it has seen the pods it takes over.

package plugin

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

func init() {
	registerKind(func(o *AdoptOptions) workloadKind { return &deploymentKind{o: o} }, "deployment", "deployments", "deploy")
}

// deploymentKind is one adoption or release of a Deployment.
type deploymentKind struct {
	o *AdoptOptions
	// d and rs are the Deployment and its active ReplicaSet where they
	// run now: the member's for adopt, the host's for release.
	d  *appsv1.Deployment
	rs *appsv1.ReplicaSet
	// hostD and hostRS are what adopt creates in the host.
	hostD  *appsv1.Deployment
	hostRS *appsv1.ReplicaSet
	// tpl and dTpl are the ReplicaSet's and the Deployment's templates
	// in member terms, for release.
	tpl, dTpl corev1.PodTemplateSpec
}

var _ workloadKind = (*deploymentKind)(nil)

func (k *deploymentKind) kind() string { return "Deployment" }

func (k *deploymentKind) readMember(ctx context.Context, ns string) (*podSource, error) {
	o := k.o
	d, err := o.Member.AppsV1().Deployments(ns).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, finishAdoption(ctx, o)
	}
	if err != nil {
		return nil, fmt.Errorf("member Deployment: %w", err)
	}
	rs, err := activeReplicaSet(ctx, o.Member, d, "adopt")
	if err != nil {
		return nil, err
	}
	k.d, k.rs = d, rs
	return &podSource{template: &d.Spec.Template, selector: rs.Spec.Selector, owned: controlledBy(rs.UID)}, nil
}

func (k *deploymentKind) planHost(p *plan) ([]string, []string, error) {
	o, d, rs := k.o, k.d, k.rs
	var err error
	k.hostRS = &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: rs.Name, Namespace: o.Namespace, Labels: rs.Labels,
		Annotations: map[string]string{wellknown.AdoptedFromAnnotation: o.adoptedFrom(p)}}, Spec: *rs.Spec.DeepCopy()}
	k.hostRS.Spec.Replicas = ptr.To(int32(len(p.pods)))
	if k.hostRS.Spec.Template, err = hostTemplate(rs.Spec.Template, o.Cluster); err != nil {
		return nil, nil, err
	}
	k.hostD = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: o.Namespace, Labels: d.Labels,
		Annotations: map[string]string{wellknown.AdoptedFromAnnotation: o.adoptedFrom(p)}}, Spec: *d.Spec.DeepCopy()}
	k.hostD.Spec.Replicas = ptr.To(int32(len(p.pods)))
	k.hostD.Spec.Paused = false
	if k.hostD.Spec.Template, err = hostTemplate(d.Spec.Template, o.Cluster); err != nil {
		return nil, nil, err
	}
	return []string{"ReplicaSet " + rs.Name, "Deployment " + d.Name}, []string{"Deployment " + d.Name, "ReplicaSet " + rs.Name}, nil
}

func (k *deploymentKind) hostWorkload(ctx context.Context) *metav1.ObjectMeta {
	if cur, err := k.o.Host.AppsV1().Deployments(k.o.Namespace).Get(ctx, k.o.Name, metav1.GetOptions{}); err == nil {
		return &cur.ObjectMeta
	}
	return nil
}

// hostReplicaSet creates the host ReplicaSet, or finds the one an earlier
// run created. The host ReplicaSet adopts the host pods (they match its
// selector and have no owner). Until its cache shows them it may create
// pods of its own: the gate keeps those off every node, and it deletes
// them as surplus once it counts the adopted ones.
func (k *deploymentKind) hostReplicaSet(ctx context.Context, p *plan) (*appsv1.ReplicaSet, error) {
	o := k.o
	gated := k.hostRS.DeepCopy()
	gated.Spec.Template.Spec.SchedulingGates = append(gated.Spec.Template.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: wellknown.AdoptingGate})
	cur, err := o.Host.AppsV1().ReplicaSets(o.Namespace).Get(ctx, k.rs.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if cur, err = o.Host.AppsV1().ReplicaSets(o.Namespace).Create(ctx, gated, metav1.CreateOptions{DryRun: o.dryRun()}); err != nil {
			return nil, fmt.Errorf("host ReplicaSet: %w", err)
		}
	case err != nil:
		return nil, err
	default:
		if err := checkHostWorkload(o, p, &cur.ObjectMeta); err != nil {
			return nil, err
		}
	}
	return cur, nil
}

// validateHost goes as far as a run would before the Deployment, the
// line that says the pods are adopted included, and has the host
// validate the ReplicaSet and the Deployment.
func (k *deploymentKind) validateHost(ctx context.Context, p *plan) error {
	o := k.o
	o.say("pods adopted: %d, running on %s", len(p.pods), o.Cluster)
	if _, err := k.hostReplicaSet(ctx, p); err != nil {
		return err
	}
	_, err := o.Host.AppsV1().Deployments(o.Namespace).Create(ctx, k.hostD, metav1.CreateOptions{DryRun: o.dryRun()})
	return err
}

func (k *deploymentKind) takeOver(ctx context.Context, p *plan) error {
	o, d, rs := k.o, k.d, k.rs
	cur, err := k.hostReplicaSet(ctx, p)
	if err != nil {
		return err
	}
	sel, err := metav1.LabelSelectorAsSelector(k.hostRS.Spec.Selector)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "the host ReplicaSet to own the adopted pods, and no others", func(ctx context.Context) (bool, string, error) {
		pods, err := o.Host.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, err.Error(), nil
		}
		owned, extra := 0, 0
		for _, pod := range pods.Items {
			if c := metav1.GetControllerOf(&pod); c != nil && c.UID == cur.UID {
				if pod.Annotations[wellknown.AdoptAnnotation] != "" {
					owned++
				} else {
					extra++
				}
			}
		}
		return owned == len(p.pods) && extra == 0, fmt.Sprintf("%d adopted pods owned, %d surplus", owned, extra), nil
	}); err != nil {
		return err
	}
	if err := ungate(ctx, o.Host, o.Namespace, rs.Name, k.hostRS.Spec.Template); err != nil {
		return fmt.Errorf("host ReplicaSet: %w", err)
	}

	// The Deployment adopts the ReplicaSet: its template is the
	// Deployment's, so no rollout starts.
	if err := createOwning(ctx, o.Host, k.hostD); err != nil {
		return fmt.Errorf("host Deployment: %w", err)
	}
	if err := waitOwnsOnly(ctx, o.Host, o.Namespace, d.Name, rs.Name); err != nil {
		return err
	}
	o.say("host Deployment %s/%s owns ReplicaSet %s and the adopted pods", o.Namespace, d.Name, rs.Name)

	// The member's own objects go; their pods stay, flotilla's now.
	if err := orphanDelete(ctx, "Deployment", func(ctx context.Context, opts metav1.DeleteOptions) error {
		return o.Member.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, opts)
	}, d.UID); err != nil {
		return err
	}
	if err := orphanDelete(ctx, "ReplicaSet", func(ctx context.Context, opts metav1.DeleteOptions) error {
		return o.Member.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, opts)
	}, rs.UID); err != nil {
		return err
	}
	if err := waitOrphaned(ctx, o.Member, p.vn.memberNS, p.pods, rs.UID); err != nil {
		return err
	}
	o.say("member Deployment and ReplicaSet deleted; the %d pods run on, under the host's Deployment", len(p.pods))
	return nil
}

// finishAdoption completes an adoption interrupted after the member
// Deployment was deleted: its ReplicaSet, if still there, is deleted too,
// orphaning the pods. Without a host Deployment adopted from it, the
// member Deployment simply does not exist.
func finishAdoption(ctx context.Context, o *AdoptOptions) error {
	vn, err := lookupCluster(ctx, o.Host, o.Cluster, o.Namespace)
	if err != nil {
		return err
	}
	hd, err := o.Host.AppsV1().Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil || hd.Annotations[wellknown.AdoptedFromAnnotation] != o.Cluster+"/"+vn.memberNS+"/"+o.Name {
		return fmt.Errorf("member Deployment %s/%s not found in cluster %s", vn.memberNS, o.Name, o.Cluster)
	}
	sets, err := o.Host.AppsV1().ReplicaSets(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, hrs := range sets.Items {
		if c := metav1.GetControllerOf(&hrs); c == nil || c.UID != hd.UID || hrs.Annotations[wellknown.AdoptedFromAnnotation] == "" {
			continue
		}
		mrs, err := o.Member.AppsV1().ReplicaSets(vn.memberNS).Get(ctx, hrs.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		pods, err := o.Member.CoreV1().Pods(vn.memberNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var owned []corev1.Pod
		for _, p := range pods.Items {
			if c := metav1.GetControllerOf(&p); c != nil && c.UID == mrs.UID {
				owned = append(owned, p)
			}
		}
		if err := orphanDelete(ctx, "ReplicaSet", func(ctx context.Context, opts metav1.DeleteOptions) error {
			return o.Member.AppsV1().ReplicaSets(vn.memberNS).Delete(ctx, mrs.Name, opts)
		}, mrs.UID); err != nil {
			return err
		}
		if err := waitOrphaned(ctx, o.Member, vn.memberNS, owned, mrs.UID); err != nil {
			return err
		}
	}
	o.say("deployment %s/%s is adopted from cluster %s: the member's own objects are gone", o.Namespace, o.Name, o.Cluster)
	return nil
}

func (k *deploymentKind) readHost(ctx context.Context, vn *clusterTarget, from string) (*podSource, error) {
	o := k.o
	hd, err := o.Host.AppsV1().Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if md, merr := o.Member.AppsV1().Deployments(vn.memberNS).Get(ctx, o.Name, metav1.GetOptions{}); merr == nil && md.Annotations[wellknown.ReleasedFromAnnotation] == from {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("host Deployment: %w", err)
	}
	rs, err := activeReplicaSet(ctx, o.Host, hd, "release")
	if err != nil {
		return nil, err
	}
	k.d, k.rs = hd, rs
	return &podSource{template: &hd.Spec.Template, selector: rs.Spec.Selector, owned: controlledBy(rs.UID)}, nil
}

func (k *deploymentKind) planMember(_ *clusterTarget, hostPods, memberPods []corev1.Pod) ([]string, error) {
	o, hd, rs := k.o, k.d, k.rs
	if int32(len(hostPods)) != ptr.Deref(rs.Spec.Replicas, 0) {
		return nil, fmt.Errorf("release deployment/%s refused: %d of its %d pods run; release it once they all do", o.Name, len(hostPods), ptr.Deref(rs.Spec.Replicas, 0))
	}
	var err error
	if k.tpl, err = memberTemplate(rs.Spec.Template, o.Cluster); err != nil {
		return nil, err
	}
	if k.dTpl, err = memberTemplate(hd.Spec.Template, o.Cluster); err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("create in the member: ReplicaSet %s owning the %d running pods, Deployment %s", rs.Name, len(memberPods), o.Name),
		fmt.Sprintf("delete in the host: Deployment %s, ReplicaSet %s and their %d pods, whose member pods flotilla lets go", o.Name, rs.Name, len(hostPods)),
	}, nil
}

func (k *deploymentKind) validateMember(ctx context.Context, vn *clusterTarget) error {
	o, rs := k.o, k.rs
	mrs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: rs.Name, Namespace: vn.memberNS, Labels: rs.Labels}, Spec: *rs.Spec.DeepCopy()}
	mrs.Spec.Template = k.tpl
	_, err := o.Member.AppsV1().ReplicaSets(vn.memberNS).Create(ctx, mrs, metav1.CreateOptions{DryRun: o.dryRun()})
	return err
}

func (k *deploymentKind) takeBack(ctx context.Context, vn *clusterTarget, from string, memberPods []corev1.Pod) error {
	o, hd, rs := k.o, k.d, k.rs
	// The member ReplicaSet adopts the member pods (they have no owner
	// there); pods it might make before it sees them are gated and
	// deleted as surplus.
	mrs, err := o.Member.AppsV1().ReplicaSets(vn.memberNS).Get(ctx, rs.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		gated := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: rs.Name, Namespace: vn.memberNS, Labels: rs.Labels,
			Annotations: map[string]string{wellknown.ReleasedFromAnnotation: from}}, Spec: *rs.Spec.DeepCopy()}
		gated.Spec.Replicas = ptr.To(int32(len(memberPods)))
		gated.Spec.Template = *k.tpl.DeepCopy()
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
	if err := ungate(ctx, o.Member, vn.memberNS, rs.Name, k.tpl); err != nil {
		return fmt.Errorf("member ReplicaSet: %w", err)
	}
	md := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: vn.memberNS, Labels: hd.Labels,
		Annotations: map[string]string{wellknown.ReleasedFromAnnotation: from}}, Spec: *hd.Spec.DeepCopy()}
	md.Spec.Template = k.dTpl
	md.Spec.Replicas = ptr.To(int32(len(memberPods)))
	if err := createOwning(ctx, o.Member, md); err != nil {
		return fmt.Errorf("member Deployment: %w", err)
	}
	if err := waitOwnsOnly(ctx, o.Member, vn.memberNS, o.Name, rs.Name); err != nil {
		return err
	}
	o.say("member Deployment %s/%s owns ReplicaSet %s and the %d running pods", vn.memberNS, o.Name, rs.Name, len(memberPods))
	return nil
}

func (k *deploymentKind) hostOwners() *hostOwners {
	o, hd := k.o, k.d
	return &hostOwners{uid: hd.UID, replicaSet: k.rs.Name, del: func(ctx context.Context, opts metav1.DeleteOptions) error {
		return o.Host.AppsV1().Deployments(o.Namespace).Delete(ctx, hd.Name, opts)
	}}
}

// settleMember has nothing left to do: the member Deployment owned its
// ReplicaSet before the host's objects went.
func (k *deploymentKind) settleMember(context.Context, *clusterTarget, []corev1.Pod) error {
	return nil
}

// activeReplicaSet is the one ReplicaSet of Deployment d with replicas,
// or an error saying how many there are: with a rollout underway the
// other side would be left to finish it.
func activeReplicaSet(ctx context.Context, c kubernetes.Interface, d *appsv1.Deployment, verb string) (*appsv1.ReplicaSet, error) {
	list, err := c.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var active []*appsv1.ReplicaSet
	for i := range list.Items {
		rs := &list.Items[i]
		if c := metav1.GetControllerOf(rs); c != nil && c.UID == d.UID && ptr.Deref(rs.Spec.Replicas, 0) > 0 {
			active = append(active, rs)
		}
	}
	if len(active) != 1 {
		return nil, fmt.Errorf("%s deployment/%s refused: %d of its ReplicaSets have replicas; %s it once its rollout is done", verb, d.Name, len(active), verb)
	}
	return active[0], nil
}

// createOwning creates Deployment d, whose template a ReplicaSet of its
// selector already has, and waits until its controller has found that
// ReplicaSet as its own. d is created paused, which makes the controller
// create no ReplicaSet, and left as d says once its status counts the
// ReplicaSet's pods as updated: the ReplicaSet was just ungated, and a
// controller whose cache still shows the gated template would otherwise
// find no ReplicaSet with d's template and make one of its own. An
// existing d (a run cut short) is waited for the same way.
func createOwning(ctx context.Context, c kubernetes.Interface, d *appsv1.Deployment) error {
	paused := d.Spec.Paused
	d = d.DeepCopy()
	d.Spec.Paused = true
	if _, err := c.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	if err := waitFor(ctx, "the Deployment's controller to find its ReplicaSet", func(ctx context.Context) (bool, string, error) {
		cur, err := c.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return cur.Status.ObservedGeneration >= cur.Generation && cur.Status.UpdatedReplicas == want,
			fmt.Sprintf("%d of %d replicas on its template", cur.Status.UpdatedReplicas, want), nil
	}); err != nil {
		return err
	}
	if paused {
		return nil
	}
	_, err := c.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, []byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{})
	return err
}

// waitOwnsOnly waits until Deployment ns/name owns ReplicaSet rsName and
// no other: its template is the ReplicaSet's, so it made none of its own.
func waitOwnsOnly(ctx context.Context, c kubernetes.Interface, ns, name, rsName string) error {
	return waitFor(ctx, "the Deployment to own its ReplicaSet, with no new one", func(ctx context.Context) (bool, string, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		list, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		var mine []string
		for _, s := range list.Items {
			if o := metav1.GetControllerOf(&s); o != nil && o.UID == d.UID {
				mine = append(mine, s.Name)
			}
		}
		if len(mine) > 1 || (len(mine) == 1 && mine[0] != rsName) {
			return false, "", fmt.Errorf("Deployment %s/%s made ReplicaSet(s) %v of its own: its template differs", ns, name, mine)
		}
		return len(mine) == 1 && d.Status.ObservedGeneration >= d.Generation, fmt.Sprintf("ReplicaSets %v", mine), nil
	})
}

// ungate gives ReplicaSet ns/name template, without the adopting gate it
// was created with, if it still has it.
func ungate(ctx context.Context, c kubernetes.Interface, ns, name string, template corev1.PodTemplateSpec) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(cur.Spec.Template.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == wellknown.AdoptingGate }) {
			return nil
		}
		cur.Spec.Template = template
		_, err = c.AppsV1().ReplicaSets(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

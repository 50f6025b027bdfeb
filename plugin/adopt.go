package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
)

// AdoptOptions is one adoption: workload Kind/Name in host namespace
// Namespace, running in Cluster.
type AdoptOptions struct {
	Host, Member kubernetes.Interface
	Namespace    string
	Kind, Name   string
	Cluster      string
	// DryRun is "" (do it), "client" (print the plan) or "server" (print
	// the plan and have the host validate what it would create).
	DryRun string
	// Installation is the host's installation id; empty reads it.
	Installation string
	Out          io.Writer
}

func (o *AdoptOptions) dryRun() []string {
	if o.DryRun == "server" {
		return []string{metav1.DryRunAll}
	}
	return nil
}

func (o *AdoptOptions) say(format string, args ...any) {
	fmt.Fprintf(o.Out, format+"\n", args...)
}

// Adopt brings a Deployment or StatefulSet running in a member under the
// host without restarting anything: host pods that flotilla-node binds to
// the running member pods, then the host workload (and ReplicaSet) over
// them, then the member's own workload objects deleted with their pods
// orphaned. Each step finds what an earlier, interrupted run did.
func Adopt(ctx context.Context, o *AdoptOptions) error {
	switch strings.ToLower(o.Kind) {
	case "deployment", "deployments", "deploy":
		return adoptDeployment(ctx, o)
	case "statefulset", "statefulsets", "sts":
		return adoptStatefulSet(ctx, o)
	case "job", "jobs", "cronjob", "cronjobs", "pod", "pods", "po":
		return fmt.Errorf("adopt %s/%s: only Deployments and StatefulSets are adopted: a Job's or a bare pod's pods would be created again by nothing, and a finished pod cannot be taken over; run it again from the host instead", o.Kind, o.Name)
	case "daemonset", "daemonsets", "ds", "replicaset", "replicasets", "rs":
		return fmt.Errorf("adopt %s/%s: only Deployments and StatefulSets are adopted: a DaemonSet is per member node, which the host does not see, and a bare ReplicaSet's pods come with its Deployment", o.Kind, o.Name)
	}
	return fmt.Errorf("adopt %s/%s: want deployment/NAME or statefulset/NAME", o.Kind, o.Name)
}

// plan is what every adoption checks before it changes anything.
type plan struct {
	vn           *clusterTarget
	installation string
	pods         []corev1.Pod // the member pods to adopt
	copies       *copyPlan
}

// prepare checks what adopting pods (selected by sel in the member, made
// from template) takes, and refuses, with every reason at once, what it
// cannot do.
func prepare(ctx context.Context, o *AdoptOptions, template *corev1.PodTemplateSpec, sel *metav1.LabelSelector, owned func(*corev1.Pod) bool) (*plan, error) {
	vn, err := lookupCluster(ctx, o.Host, o.Cluster, o.Namespace)
	if err != nil {
		return nil, err
	}
	inst, err := installationID(ctx, o.Host, o.Installation)
	if err != nil {
		return nil, err
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	list, err := o.Member.CoreV1().Pods(vn.memberNS).List(ctx, metav1.ListOptions{LabelSelector: s.String()})
	if err != nil {
		return nil, fmt.Errorf("member pods: %w", err)
	}
	p := &plan{vn: vn, installation: inst}
	var refusals []string
	for i := range list.Items {
		pod := &list.Items[i]
		if !owned(pod) && pod.Labels[wellknown.HostUIDLabel] == "" {
			continue
		}
		switch {
		case pod.DeletionTimestamp != nil:
			refusals = append(refusals, fmt.Sprintf("pod %s is being deleted: wait until it is gone", pod.Name))
		case podstate.Terminal(pod):
			refusals = append(refusals, fmt.Sprintf("pod %s has finished (%s): delete it first", pod.Name, pod.Status.Phase))
		case pod.Labels[wellknown.InstallationLabel] != "" && pod.Labels[wellknown.InstallationLabel] != inst:
			refusals = append(refusals, fmt.Sprintf("pod %s belongs to another flotilla installation", pod.Name))
		}
		p.pods = append(p.pods, *pod)
	}
	slices.SortFunc(p.pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	if c := claims(&template.Spec); len(c) > 0 {
		refusals = append(refusals, "its pods use PersistentVolumeClaims ("+strings.Join(c, ", ")+"), which adopt does not bring into the host yet")
	}
	if pc := template.Spec.PriorityClassName; pc != "" {
		if _, err := o.Host.SchedulingV1().PriorityClasses().Get(ctx, pc, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			refusals = append(refusals, "PriorityClass/"+pc+" does not exist in the host")
		}
	}
	if p.copies, err = planCopies(ctx, o.Host, o.Member, o.Namespace, vn.memberNS, &template.Spec, template.Labels); err != nil {
		return nil, err
	}
	for _, m := range p.copies.missing {
		refusals = append(refusals, m+" is missing in the member and in the host")
	}
	if len(refusals) > 0 {
		return nil, fmt.Errorf("adopt %s/%s from cluster %s refused:\n  - %s", o.Kind, o.Name, o.Cluster, strings.Join(refusals, "\n  - "))
	}
	return p, nil
}

func (o *AdoptOptions) printPlan(p *plan, creates, orphans []string) {
	o.say("Adopt %s %s/%s from cluster %s (member namespace %s), restarting nothing:", strings.ToLower(o.Kind), o.Namespace, o.Name, o.Cluster, p.vn.memberNS)
	var names []string
	for _, pod := range p.pods {
		names = append(names, pod.Name)
	}
	o.say("  adopt %d running pods: %s", len(p.pods), strings.Join(names, " "))
	if len(p.copies.names) > 0 {
		o.say("  copy from the member into the host: %s", strings.Join(p.copies.names, ", "))
	}
	o.say("  create in the host: %s", strings.Join(creates, ", "))
	o.say("  delete in the member, leaving its pods running: %s", strings.Join(orphans, ", "))
}

// adoptedFrom is the value of wellknown.AdoptedFromAnnotation for this adoption.
func (o *AdoptOptions) adoptedFrom(p *plan) string {
	return o.Cluster + "/" + p.vn.memberNS + "/" + o.Name
}

// checkHostWorkload refuses a host object of the workload's name that an
// adoption of this workload did not make.
func checkHostWorkload(o *AdoptOptions, p *plan, meta *metav1.ObjectMeta) error {
	if meta.Annotations[wellknown.AdoptedFromAnnotation] != o.adoptedFrom(p) {
		return fmt.Errorf("%s %s/%s already exists in the host and was not adopted from %s: delete or rename it first", o.Kind, o.Namespace, o.Name, o.adoptedFrom(p))
	}
	return nil
}

// adoptPods does what every adoption starts with, once the plan is made:
// refuse a host workload of the name that another adoption made, then
// the host namespace, the copies, and the host pods taking the member
// pods over.
func (o *AdoptOptions) adoptPods(ctx context.Context, p *plan, existing *metav1.ObjectMeta) error {
	if existing != nil {
		if err := checkHostWorkload(o, p, existing); err != nil {
			return err
		}
	}
	dry := o.dryRun()
	if err := ensureNamespace(ctx, o.Host, o.Namespace, dry); err != nil {
		return err
	}
	if err := createCopies(ctx, o.Host, p.copies, dry); err != nil {
		return err
	}
	return adoptHostPods(ctx, o.Host, o.Member, p.vn, o.Namespace, p.pods, p.installation, dry)
}

func adoptDeployment(ctx context.Context, o *AdoptOptions) error {
	d, err := o.Member.AppsV1().Deployments(memberNamespace(ctx, o)).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return finishAdoption(ctx, o)
	}
	if err != nil {
		return fmt.Errorf("member Deployment: %w", err)
	}
	rs, err := activeReplicaSet(ctx, o.Member, d, "adopt")
	if err != nil {
		return err
	}
	p, err := prepare(ctx, o, &d.Spec.Template, rs.Spec.Selector, controlledBy(rs.UID))
	if err != nil {
		return err
	}
	hostRS := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: rs.Name, Namespace: o.Namespace, Labels: rs.Labels,
		Annotations: map[string]string{wellknown.AdoptedFromAnnotation: o.adoptedFrom(p)}}, Spec: *rs.Spec.DeepCopy()}
	hostRS.Spec.Replicas = ptr.To(int32(len(p.pods)))
	if hostRS.Spec.Template, err = hostTemplate(rs.Spec.Template, o.Cluster); err != nil {
		return err
	}
	hostD := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: o.Namespace, Labels: d.Labels,
		Annotations: map[string]string{wellknown.AdoptedFromAnnotation: o.adoptedFrom(p)}}, Spec: *d.Spec.DeepCopy()}
	hostD.Spec.Replicas = ptr.To(int32(len(p.pods)))
	hostD.Spec.Paused = false
	if hostD.Spec.Template, err = hostTemplate(d.Spec.Template, o.Cluster); err != nil {
		return err
	}
	o.printPlan(p, []string{"namespace " + o.Namespace + " (if missing)", fmt.Sprintf("%d pods", len(p.pods)), "ReplicaSet " + rs.Name, "Deployment " + d.Name},
		[]string{"Deployment " + d.Name, "ReplicaSet " + rs.Name})
	if o.DryRun == "client" {
		return nil
	}
	var existing *metav1.ObjectMeta
	if cur, err := o.Host.AppsV1().Deployments(o.Namespace).Get(ctx, d.Name, metav1.GetOptions{}); err == nil {
		existing = &cur.ObjectMeta
	}
	dry := o.dryRun()
	if err := o.adoptPods(ctx, p, existing); err != nil {
		return err
	}
	o.say("pods adopted: %d, running on %s", len(p.pods), o.Cluster)

	// The host ReplicaSet adopts the host pods (they match its selector
	// and have no owner). Until its cache shows them it may create pods of
	// its own: the gate keeps those off every node, and it deletes them as
	// surplus once it counts the adopted ones.
	gated := hostRS.DeepCopy()
	gated.Spec.Template.Spec.SchedulingGates = append(gated.Spec.Template.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: wellknown.AdoptingGate})
	cur, err := o.Host.AppsV1().ReplicaSets(o.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if cur, err = o.Host.AppsV1().ReplicaSets(o.Namespace).Create(ctx, gated, metav1.CreateOptions{DryRun: dry}); err != nil {
			return fmt.Errorf("host ReplicaSet: %w", err)
		}
	case err != nil:
		return err
	default:
		if err := checkHostWorkload(o, p, &cur.ObjectMeta); err != nil {
			return err
		}
	}
	if o.DryRun == "server" {
		_, err := o.Host.AppsV1().Deployments(o.Namespace).Create(ctx, hostD, metav1.CreateOptions{DryRun: dry})
		return err
	}
	sel, err := metav1.LabelSelectorAsSelector(hostRS.Spec.Selector)
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
	if err := ungate(ctx, o.Host, o.Namespace, rs.Name, hostRS.Spec.Template); err != nil {
		return fmt.Errorf("host ReplicaSet: %w", err)
	}

	// The Deployment adopts the ReplicaSet: its template is the
	// Deployment's, so no rollout starts.
	if err := createOwning(ctx, o.Host, hostD); err != nil {
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

// memberNamespace is the member namespace o.Namespace maps to in o.Cluster,
// or o.Namespace when the cluster cannot be read (prepare reports that).
func memberNamespace(ctx context.Context, o *AdoptOptions) string {
	vn, err := lookupCluster(ctx, o.Host, o.Cluster, o.Namespace)
	if err != nil {
		return o.Namespace
	}
	return vn.memberNS
}

// orphanDelete deletes a member object, orphaning what it owns; one
// already gone is fine.
func orphanDelete(ctx context.Context, kind string, del func(context.Context, metav1.DeleteOptions) error, uid types.UID) error {
	err := del(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan), Preconditions: metav1.NewUIDPreconditions(string(uid))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete member %s (orphaning its pods): %w", kind, err)
	}
	return nil
}

// waitOrphaned waits until the member's garbage collector has taken owner
// uid off the pods.
func waitOrphaned(ctx context.Context, member kubernetes.Interface, ns string, pods []corev1.Pod, uid types.UID) error {
	return waitFor(ctx, "the member pods to be orphaned", func(ctx context.Context) (bool, string, error) {
		for _, m := range pods {
			mp, err := member.CoreV1().Pods(ns).Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", fmt.Errorf("member pod %s: %w", m.Name, err)
			}
			if mp.UID != m.UID {
				return false, "", fmt.Errorf("member pod %s was replaced", m.Name)
			}
			if slices.ContainsFunc(mp.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == uid }) {
				return false, "pod " + m.Name + " still owned", nil
			}
		}
		return true, "", nil
	})
}

func adoptStatefulSet(ctx context.Context, o *AdoptOptions) error {
	s, err := o.Member.AppsV1().StatefulSets(memberNamespace(ctx, o)).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("member StatefulSet: %w", err)
	}
	if len(s.Spec.VolumeClaimTemplates) > 0 {
		return fmt.Errorf("adopt statefulset/%s refused: its volumeClaimTemplates make PersistentVolumeClaims, which adopt does not bring into the host yet", o.Name)
	}
	if s.Status.CurrentRevision != s.Status.UpdateRevision {
		return fmt.Errorf("adopt statefulset/%s refused: a rollout is underway (revision %s to %s); adopt it once it is done", o.Name, s.Status.CurrentRevision, s.Status.UpdateRevision)
	}
	p, err := prepare(ctx, o, &s.Spec.Template, s.Spec.Selector, controlledBy(s.UID))
	if err != nil {
		return err
	}
	hostS := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: o.Namespace, Labels: s.Labels,
		Annotations: map[string]string{wellknown.AdoptedFromAnnotation: o.adoptedFrom(p)}}, Spec: *s.Spec.DeepCopy()}
	if hostS.Spec.Template, err = hostTemplate(s.Spec.Template, o.Cluster); err != nil {
		return err
	}
	// OnDelete until the host has relabelled the pods with its own
	// revision: a rolling update would replace every pod whose revision is
	// the member's.
	strategy := hostS.Spec.UpdateStrategy
	hostS.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	o.printPlan(p, []string{"namespace " + o.Namespace + " (if missing)", fmt.Sprintf("%d pods", len(p.pods)), "StatefulSet " + s.Name},
		[]string{"StatefulSet " + s.Name})
	if o.DryRun == "client" {
		return nil
	}
	var existing *metav1.ObjectMeta
	if cur, err := o.Host.AppsV1().StatefulSets(o.Namespace).Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
		existing = &cur.ObjectMeta
	}
	dry := o.dryRun()
	if err := o.adoptPods(ctx, p, existing); err != nil {
		return err
	}
	if o.DryRun == "server" {
		_, err := o.Host.AppsV1().StatefulSets(o.Namespace).Create(ctx, hostS, metav1.CreateOptions{DryRun: dry})
		return err
	}
	o.say("pods adopted: %d, running on %s", len(p.pods), o.Cluster)
	if _, err := o.Host.AppsV1().StatefulSets(o.Namespace).Create(ctx, hostS, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("host StatefulSet: %w", err)
	}
	var hs *appsv1.StatefulSet
	if err := waitFor(ctx, "the host StatefulSet to own the adopted pods", func(ctx context.Context) (bool, string, error) {
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
		hs, err = o.Host.AppsV1().StatefulSets(o.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return hs.Status.UpdatedReplicas == int32(len(p.pods)), fmt.Sprintf("%d of %d updated", hs.Status.UpdatedReplicas, len(p.pods)), nil
	}); err != nil {
		return err
	}
	if err := setStrategy(ctx, o.Host, o.Namespace, s.Name, strategy); err != nil {
		return fmt.Errorf("host StatefulSet update strategy: %w", err)
	}
	o.say("host StatefulSet %s/%s owns the adopted pods, which run on", o.Namespace, s.Name)
	return nil
}

func newAdoptCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	return workloadCommand(flags, streams, "adopt", "Take a workload running in a member cluster under the host, restarting nothing",
		`Take a Deployment or StatefulSet that runs in a member cluster under the host
in place: the host gets the workload and one pod per running member pod,
bound to the cluster's virtual node; the member pods are the same pods
(same UIDs, no container restarted), now flotilla's; the member's own
Deployment and ReplicaSet (or StatefulSet) are deleted with their pods
orphaned. What the pods use (ConfigMaps, Secrets, ServiceAccount, Services
that select them) is copied into the host when the host lacks it; anything
missing in both refuses the adoption up front, listing every reason.

The member is reached with --member-kubeconfig or --member-context; -n is
the host namespace, whose member namespace follows the cluster's namespace
mapping. A run that was interrupted can be run again: it finds what was
done and finishes.`, Adopt)
}

// workloadCommand is adopt's or release's command: KIND/NAME, the cluster,
// the member's credentials and a dry run, then run.
func workloadCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, verb, short, long string, run func(context.Context, *AdoptOptions) error) *cobra.Command {
	var member memberFlags
	o := &AdoptOptions{Out: streams.Out}
	cmd := &cobra.Command{
		Use:   verb + " (deployment/NAME | statefulset/NAME) --cluster CLUSTER",
		Short: short,
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			kind, name, ok := strings.Cut(args[0], "/")
			if !ok {
				return fmt.Errorf("want KIND/NAME, e.g. deployment/web")
			}
			o.Kind, o.Name = kind, name
			if o.Cluster == "" {
				return fmt.Errorf("--cluster is required: the virtual node of the member the workload runs in")
			}
			if o.DryRun != "" && o.DryRun != "client" && o.DryRun != "server" && o.DryRun != "none" {
				return fmt.Errorf("--dry-run %q: want none, client or server", o.DryRun)
			}
			if o.DryRun == "none" {
				o.DryRun = ""
			}
			if o.Host, err = hostClient(flags); err != nil {
				return err
			}
			if o.Member, err = member.client(flags); err != nil {
				return err
			}
			if o.Namespace, _, err = flags.ToRawKubeConfigLoader().Namespace(); err != nil {
				return err
			}
			return run(cmd.Context(), o)
		},
	}
	addWorkloadFlags(cmd, &member, &o.Cluster, &o.DryRun, &o.Installation)
	return cmd
}

func addWorkloadFlags(cmd *cobra.Command, member *memberFlags, cluster, dryRun, installation *string) {
	cmd.Flags().StringVar(cluster, "cluster", "", "the cluster (virtual node) the workload runs in")
	cmd.Flags().StringVar(&member.kubeconfig, "member-kubeconfig", "", "kubeconfig of the member cluster")
	cmd.Flags().StringVar(&member.context, "member-context", "", "context of the member cluster (in --member-kubeconfig, else in the host's kubeconfig)")
	cmd.Flags().StringVar(dryRun, "dry-run", "none", `"none", "client" (print the plan only) or "server" (print it and have the host validate its objects)`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "client"
	cmd.Flags().StringVar(installation, "installation-id", "", "the flotilla installation id, if flotilla-node runs with --installation-id (default: the UID of the host's kube-system namespace)")
}

package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
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

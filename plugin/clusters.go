package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/yaml"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
)

// GPU is the extended resource `clusters` reports as GPUs.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// Cluster is one row of `kubectl flotilla clusters`: a virtual node, which
// stands for a member cluster or a label partition of one.
type Cluster struct {
	// Name is the virtual node's name, the cluster name placement uses.
	Name string `json:"name"`
	// Member is the member cluster it is (a part of).
	Member string `json:"member,omitempty"`
	// Mode is push or pull.
	Mode string `json:"mode,omitempty"`
	// Ready is the node's Ready condition, since when, and why.
	Ready        corev1.ConditionStatus `json:"ready"`
	ReadySince   *metav1.Time           `json:"readySince,omitempty"`
	ReadyMessage string                 `json:"readyMessage,omitempty"`
	// Cordoned is true when the node is unschedulable.
	Cordoned bool `json:"cordoned,omitempty"`
	// KubeletAPI says whether the host apiserver reaches the node's kubelet
	// endpoint (logs, exec, ...): Reachable, Unreachable, or empty when
	// flotilla-node does not probe it.
	KubeletAPI        string `json:"kubeletAPI,omitempty"`
	KubeletAPIMessage string `json:"kubeletAPIMessage,omitempty"`
	// KubernetesVersion is the member's.
	KubernetesVersion string `json:"kubernetesVersion"`
	// VersionSupported is the node's KubernetesVersionSupported condition:
	// True when flotilla supports the versions of the member and the host,
	// False (VersionMessage says which and why) when not, Unknown while a
	// version is not known, empty from a flotilla-node that does not say.
	VersionSupported corev1.ConditionStatus `json:"versionSupported,omitempty"`
	VersionMessage   string                 `json:"versionMessage,omitempty"`
	// Nodes counts the member nodes the virtual node stands for.
	Nodes int `json:"nodes"`
	// Allocatable is what the host scheduler may place on the cluster;
	// Requested what the pods bound to it request.
	Allocatable corev1.ResourceList `json:"allocatable"`
	Requested   corev1.ResourceList `json:"requested"`
	// Pods counts the pods bound to the cluster that are not finished;
	// Backlog those of them that have not started there yet (waiting to
	// be forwarded, or to be scheduled by the member).
	Pods    int `json:"pods"`
	Backlog int `json:"backlog"`
	// Heartbeat is flotilla-node's last renewal of the node's lease; how
	// long ago it was is how stale the cluster's status may be.
	Heartbeat *metav1.Time `json:"heartbeat,omitempty"`
}

// ListClusters reads the host's virtual nodes, their leases and the pods
// bound to them: only what flotilla-node publishes, with the permissions to
// read nodes, leases in kube-node-lease and pods.
func ListClusters(ctx context.Context, c kubernetes.Interface) ([]Cluster, error) {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: wellknown.ClusterLabel})
	if err != nil {
		return nil, fmt.Errorf("list virtual nodes: %w", err)
	}
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	byNode := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	var out []Cluster
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Labels[wellknown.TypeLabel] != wellknown.TypeValue {
			continue
		}
		row := cluster(n, byNode[n.Name])
		// A missing lease (permissions, an old flotilla-node) leaves the
		// heartbeat unknown rather than failing the listing.
		if l, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{}); err == nil && l.Spec.RenewTime != nil {
			row.Heartbeat = &metav1.Time{Time: l.Spec.RenewTime.Time}
		}
		out = append(out, row)
	}
	slices.SortFunc(out, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// cluster builds the row of virtual node n with the unfinished pods bound
// to it.
func cluster(n *corev1.Node, pods []*corev1.Pod) Cluster {
	row := Cluster{
		Name:              n.Name,
		Member:            n.Labels[wellknown.MemberLabel],
		Mode:              n.Annotations[wellknown.ModeAnnotation],
		Ready:             corev1.ConditionUnknown,
		Cordoned:          n.Spec.Unschedulable,
		KubernetesVersion: n.Status.NodeInfo.KubeletVersion,
		Allocatable:       corev1.ResourceList{},
		Requested:         corev1.ResourceList{},
	}
	for _, c := range n.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			row.Ready, row.ReadySince = c.Status, c.LastTransitionTime.DeepCopy()
			if c.Status != corev1.ConditionTrue {
				row.ReadyMessage = c.Message
			}
		case wellknown.NodeKubernetesVersionSupported:
			row.VersionSupported = c.Status
			if c.Status != corev1.ConditionTrue {
				row.VersionMessage = c.Message
			}
		case wellknown.NodeKubeletAPIUnreachable:
			switch c.Status {
			case corev1.ConditionFalse:
				row.KubeletAPI = "Reachable"
			case corev1.ConditionTrue:
				row.KubeletAPI, row.KubeletAPIMessage = "Unreachable", c.Message
			default:
				row.KubeletAPI = "Unknown"
			}
		}
	}
	if m, err := fit.Decode(n.Annotations[wellknown.FitModelAnnotation]); err == nil {
		for _, g := range m.Groups {
			for _, s := range g.Free {
				row.Nodes += s.Nodes
			}
		}
		row.Nodes += m.Omitted
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, GPU} {
		if q, ok := n.Status.Allocatable[r]; ok {
			row.Allocatable[r] = q.DeepCopy()
		}
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || podstate.Terminal(p) {
			continue
		}
		row.Pods++
		if p.Status.StartTime == nil {
			row.Backlog++
		}
		for r, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			if r != corev1.ResourceCPU && r != corev1.ResourceMemory && r != GPU {
				continue
			}
			sum := row.Requested[r]
			sum.Add(q)
			row.Requested[r] = sum
		}
	}
	return row
}

func newClustersCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "clusters",
		Short: "List the member clusters (virtual nodes) of the host, with their state, capacity and pods",
		Long: `List the virtual nodes of the host: one per member cluster, or per label
partition of one. Read from what flotilla-node publishes on each node (its
conditions, capacity, member nodes, lease) and from the pods bound to it.

VERSION is the member's Kubernetes version; SUPPORTED whether flotilla
supports it and the host's (False says which is not in -o wide). BACKLOG
counts the pods bound to a cluster that have not started there yet:
waiting to be forwarded, or to be scheduled by the member. HEARTBEAT is how
long ago flotilla-node last renewed the node's lease.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := hostClient(flags)
			if err != nil {
				return err
			}
			rows, err := ListClusters(cmd.Context(), c)
			if err != nil {
				return err
			}
			return printClusters(streams.Out, rows, output, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	return cmd
}

// printClusters writes rows in format: a table (wide adds columns), json
// or yaml.
func printClusters(w io.Writer, rows []Cluster, format string, now time.Time) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(map[string]any{"clusters": rows}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(map[string]any{"clusters": rows})
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "", "wide":
	default:
		return fmt.Errorf("--output %q: want wide, json or yaml", format)
	}
	wide := format == "wide"
	tw := printers.GetNewTabWriter(w)
	header := "NAME\tMEMBER\tMODE\tREADY\tSINCE\tVERSION\tSUPPORTED\tNODES\tCPU\tMEMORY\tGPU\tPODS\tBACKLOG\tHEARTBEAT"
	if wide {
		header += "\tKUBELET-API\tMESSAGE"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		ready := string(r.Ready)
		if r.Cordoned {
			ready += ",SchedulingDisabled"
		}
		line := []string{
			r.Name, dash(r.Member), dash(r.Mode), ready, age(r.ReadySince, now), dash(r.KubernetesVersion), dash(string(r.VersionSupported)),
			fmt.Sprint(r.Nodes),
			usage(r.Requested, r.Allocatable, corev1.ResourceCPU),
			usage(r.Requested, r.Allocatable, corev1.ResourceMemory),
			usage(r.Requested, r.Allocatable, GPU),
			fmt.Sprint(r.Pods), fmt.Sprint(r.Backlog), age(r.Heartbeat, now),
		}
		if wide {
			msg := r.ReadyMessage
			for _, m := range []string{r.KubeletAPIMessage, r.VersionMessage} {
				if m != "" {
					msg = strings.TrimSpace(msg + " " + m)
				}
			}
			line = append(line, dash(r.KubeletAPI), dash(msg))
		}
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	return tw.Flush()
}

// usage is "requested/allocatable" of resource r, "-" when the cluster
// has none of it.
func usage(requested, allocatable corev1.ResourceList, r corev1.ResourceName) string {
	a, ok := allocatable[r]
	if !ok || a.IsZero() {
		return "-"
	}
	q := requested[r]
	return quantity(q, r) + "/" + quantity(a, r)
}

// quantity prints cpu in cores (with millicores below one core) and memory
// in binary units, as kubectl describe node does.
func quantity(q resource.Quantity, r corev1.ResourceName) string {
	switch r {
	case corev1.ResourceCPU:
		if q.MilliValue()%1000 == 0 {
			return fmt.Sprint(q.Value())
		}
		return fmt.Sprintf("%dm", q.MilliValue())
	case corev1.ResourceMemory:
		const gi = 1 << 30
		switch v := q.Value(); {
		case v >= gi && v%gi == 0:
			return fmt.Sprintf("%dGi", v/gi)
		case v >= gi:
			return fmt.Sprintf("%.1fGi", float64(v)/gi)
		default:
			return fmt.Sprintf("%dMi", v>>20)
		}
	}
	return q.String()
}

// age is how long ago t was, as kubectl prints ages, or "-".
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

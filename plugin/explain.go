package plugin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
)

// Explanation is what `kubectl flotilla explain` says about one pod.
type Explanation struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Verdict is the one line that says where the pod runs, or why it
	// does not.
	Verdict string          `json:"verdict"`
	Phase   corev1.PodPhase `json:"phase"`
	// Cluster is the virtual node the host scheduler bound the pod to,
	// with its state; nil while it is not bound, or bound to a host node.
	Cluster *Cluster `json:"cluster,omitempty"`
	// HostNode is a host node that is not a virtual node the pod is bound to.
	HostNode string `json:"hostNode,omitempty"`
	// Policy is the PropagationPolicy that placed the pod, and the cluster
	// it assigned, if any; Overrides the override policies applied.
	Policy        string `json:"policy,omitempty"`
	PolicyCluster string `json:"policyCluster,omitempty"`
	Overrides     string `json:"overrides,omitempty"`
	// FitVerdict is placement's answer of each cluster it left out.
	FitVerdict string `json:"fitVerdict,omitempty"`
	// NodeFeatures are the node features the pod needs and the clusters
	// that declare them, read when the host scheduler left nodes out for
	// not declaring them.
	NodeFeatures []NodeFeature `json:"nodeFeatures,omitempty"`
	// HostScheduler is the host scheduler's verdict: the node it bound the
	// pod to, or why it could not.
	HostScheduler string `json:"hostScheduler"`
	// Preempted are the pods the host scheduler preempted to make room
	// for this one ("namespace/name in cluster"), as its Preempted events
	// on them tell while the host keeps events.
	Preempted []string `json:"preempted,omitempty"`
	// MemberNamespace, MemberNode and MemberScheduler are where the member
	// pod is and what the member's scheduler said, as its events tell.
	MemberNamespace string `json:"memberNamespace,omitempty"`
	MemberNode      string `json:"memberNode,omitempty"`
	MemberScheduler string `json:"memberScheduler,omitempty"`
	// Containers are the containers' states, as the member reports them.
	Containers []Container `json:"containers,omitempty"`
	// Events are the pod's last events, host and member ones (mirrored
	// by flotilla-node), oldest first.
	Events []Event `json:"events,omitempty"`
}

// Container is one container's state.
type Container struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Restarts int32  `json:"restarts"`
}

// Event is one event of the pod.
type Event struct {
	Time    metav1.Time `json:"time"`
	Type    string      `json:"type"`
	Reason  string      `json:"reason"`
	From    string      `json:"from"`
	Message string      `json:"message"`
	Count   int32       `json:"count,omitempty"`
}

// maxEvents is how many of a pod's events explain shows.
const maxEvents = 8

// Explain gathers what the host knows of pod ns/name: the pod, its events,
// and its virtual node with that node's lease and pods.
func Explain(ctx context.Context, c kubernetes.Interface, ns, name string) (*Explanation, error) {
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return explainPod(ctx, c, pod, &preemptions{})
}

func explainPod(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, pre *preemptions) (*Explanation, error) {
	evs, err := c.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod.Name})
	if err != nil {
		return nil, fmt.Errorf("events of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var events []corev1.Event
	for _, e := range evs.Items {
		if e.InvolvedObject.UID == "" || e.InvolvedObject.UID == pod.UID {
			events = append(events, e)
		}
	}
	var node *Cluster
	hostNode := ""
	if pod.Spec.NodeName != "" {
		n, err := c.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			node = &Cluster{Name: pod.Spec.NodeName, Ready: corev1.ConditionUnknown, ReadyMessage: "the node is gone"}
		case err != nil:
			return nil, fmt.Errorf("node %s: %w", pod.Spec.NodeName, err)
		case n.Labels[wellknown.TypeLabel] != wellknown.TypeValue || n.Labels[wellknown.ClusterLabel] == "":
			hostNode = n.Name
		default:
			row := cluster(n, nil)
			if l, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{}); err == nil && l.Spec.RenewTime != nil {
				row.Heartbeat = &metav1.Time{Time: l.Spec.RenewTime.Time}
			}
			node = &row
		}
	}
	features, err := readNodeFeatures(ctx, c, pod)
	if err != nil {
		return nil, err
	}
	x := explain(pod, node, hostNode, events, features)
	if x.Preempted, err = pre.of(ctx, c, pod); err != nil {
		return nil, err
	}
	return x, nil
}

// preemptions are the host scheduler's Preempted events, read once for
// the pods of one explain (a workload's share a namespace).
type preemptions struct {
	events []corev1.Event
	read   bool
}

// of returns the pods the host scheduler preempted for pod: the subjects
// of its Preempted events that name pod as the preemptor. Victims may be
// in any namespace; a user who may not list events in all of them is told
// of those in the pod's own.
func (p *preemptions) of(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) ([]string, error) {
	if !p.read {
		opts := metav1.ListOptions{FieldSelector: "reason=Preempted"}
		evs, err := c.CoreV1().Events(metav1.NamespaceAll).List(ctx, opts)
		if apierrors.IsForbidden(err) {
			evs, err = c.CoreV1().Events(pod.Namespace).List(ctx, opts)
		}
		if err != nil {
			return nil, fmt.Errorf("preemption events: %w", err)
		}
		p.events, p.read = evs.Items, true
	}
	var out []string
	for _, e := range p.events {
		byPod := e.Related != nil && e.Related.UID == pod.UID
		if e.Reason != "Preempted" || !byPod && !strings.Contains(e.Message, "Preempted by pod "+string(pod.UID)+" ") {
			continue
		}
		v := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		if _, node, ok := strings.Cut(e.Message, " on node "); ok {
			v += " in " + node
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// assigned matches the scheduler's Scheduled event.
var assigned = regexp.MustCompile(`^Successfully assigned (\S+)/(\S+) to (\S+)$`)

// explain is Explain's reasoning, on what was read: the pod, the virtual
// node it is bound to (nil if none), a host node that is not virtual,
// the pod's events and the node features it needs.
func explain(pod *corev1.Pod, node *Cluster, hostNode string, events []corev1.Event, features []NodeFeature) *Explanation {
	x := &Explanation{
		Namespace: pod.Namespace, Name: pod.Name, Phase: pod.Status.Phase, Cluster: node, HostNode: hostNode, NodeFeatures: features,
		Policy: pod.Annotations[wellknown.PlacementAnnotation], PolicyCluster: pod.Annotations[wellknown.PolicyClusterAnnotation],
		Overrides: pod.Annotations[wellknown.AppliedOverridesAnnotation], FitVerdict: pod.Annotations[wellknown.FitVerdictAnnotation],
	}
	// Event times have a second's grain: the order the apiserver stored
	// them in (their resource versions, from one etcd) breaks ties.
	slices.SortStableFunc(events, func(a, b corev1.Event) int {
		if c := eventTime(a).Compare(eventTime(b)); c != 0 {
			return c
		}
		ra, _ := strconv.ParseUint(a.ResourceVersion, 10, 64)
		rb, _ := strconv.ParseUint(b.ResourceVersion, 10, 64)
		return cmp.Compare(ra, rb)
	})
	for _, e := range events {
		if e.Reason == "Scheduled" {
			if m := assigned.FindStringSubmatch(e.Message); m != nil && m[3] != pod.Spec.NodeName {
				x.MemberNamespace, x.MemberNode = m[1], m[3]
			}
		}
	}
	for _, e := range events[max(0, len(events)-maxEvents):] {
		x.Events = append(x.Events, Event{Time: metav1.NewTime(eventTime(e)), Type: e.Type, Reason: e.Reason,
			From: source(e), Message: e.Message, Count: e.Count})
	}
	for _, s := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		x.Containers = append(x.Containers, Container{Name: s.Name, State: containerState(s.State), Restarts: s.RestartCount})
	}
	scheduled := condition(pod, corev1.PodScheduled)
	switch {
	case pod.Spec.NodeName != "":
		x.HostScheduler = "bound to " + pod.Spec.NodeName
		if scheduled != nil && scheduled.Status == corev1.ConditionFalse {
			// A bound pod's PodScheduled condition is the member's.
			x.MemberScheduler = scheduled.Message
		}
	case slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == wellknown.FitGate }):
		x.HostScheduler = "not yet: held by flotilla's fit gate (" + wellknown.FitGate + ")"
	case scheduled != nil && scheduled.Status == corev1.ConditionFalse:
		x.HostScheduler = scheduled.Message
	case len(pod.Spec.SchedulingGates) > 0:
		x.HostScheduler = "not yet: scheduling gate " + pod.Spec.SchedulingGates[0].Name
	default:
		x.HostScheduler = "not yet"
	}
	x.Verdict = verdict(pod, x, events)
	return x
}

// verdict is the one line at the top: where the pod runs, or the reason it
// does not, from the first of these that applies.
func verdict(pod *corev1.Pod, x *Explanation, events []corev1.Event) string {
	latest := func(reasons ...string) *corev1.Event {
		for i := len(events) - 1; i >= 0; i-- {
			if slices.Contains(reasons, events[i].Reason) {
				return &events[i]
			}
		}
		return nil
	}
	where := ""
	if x.Cluster != nil {
		where = "cluster " + x.Cluster.Name
		if x.Cluster.Member != "" && x.Cluster.Member != x.Cluster.Name {
			where += " (member " + x.Cluster.Member + ")"
		}
	}
	switch {
	case pod.DeletionTimestamp != nil:
		if e := latest(wellknown.EventWaitingForCluster); e != nil {
			return "Terminating, waiting for its cluster: " + e.Message
		}
		if x.Cluster != nil && x.Cluster.Ready != corev1.ConditionTrue {
			return fmt.Sprintf("Terminating: %s is not Ready (%s); the member pod is deleted once it is back", where, x.Cluster.ReadyMessage)
		}
		return "Terminating in " + dash(where)
	case pod.Status.Phase == corev1.PodSucceeded:
		return "Succeeded in " + dash(where)
	case pod.Status.Phase == corev1.PodFailed:
		switch pod.Status.Reason {
		case wellknown.ReasonMemberUnschedulable:
			return "Handed back by " + where + ", which could not schedule it: " + pod.Status.Message
		case wellknown.ReasonForwardFailed:
			return "Failed: " + where + " refused it: " + pod.Status.Message
		case wellknown.ReasonMemberPodDeleted:
			// Evicted or deleted there; a pod with a controller is deleted
			// in the host instead, so this one has none to replace it.
			return "Failed: its pod in " + where + " was removed there, and nothing replaces a pod without a controller: " + pod.Status.Message
		}
		return fmt.Sprintf("Failed in %s: %s %s", dash(where), pod.Status.Reason, pod.Status.Message)
	case pod.Spec.NodeName == "" && pod.Status.NominatedNodeName != "":
		return "Pending in the host, preempting lower-priority pods in " + pod.Status.NominatedNodeName +
			": the host scheduler binds it there once they are gone"
	case pod.Spec.NodeName == "":
		if e := latest(wellknown.EventNoClusterFits); e != nil {
			return "Pending in the host, no cluster fits: " + e.Message
		}
		if x.FitVerdict != "" {
			return "Pending in the host, no cluster fits: " + x.FitVerdict
		}
		if missing := undeclared(x.NodeFeatures); len(missing) > 0 {
			return "Pending in the host, no cluster declares the node features it needs: " + strings.Join(missing, ", ") +
				" (a cluster declares a feature when one of its Ready member nodes does: Kubernetes 1.36 or later, with the feature on)"
		}
		return "Pending in the host, not scheduled: " + x.HostScheduler
	case x.HostNode != "":
		return "Runs on host node " + x.HostNode + ", not in a member cluster"
	}
	// Bound to a virtual node.
	if e := latest(wellknown.EventMandatorySecretNotFound, wellknown.EventMandatoryConfigMapNotFound); e != nil && !podstate.Ready(pod) && pod.Status.StartTime == nil {
		return "Held back by flotilla, not forwarded to " + where + ": " + e.Message
	}
	if pod.Status.Reason == wellknown.ReasonFieldNotSupported {
		return "Not run in " + where + ", which would lose a field it sets: " + pod.Status.Message
	}
	if x.Cluster.Ready != corev1.ConditionTrue {
		msg := x.Cluster.ReadyMessage
		if msg == "" {
			msg = "its Ready condition is " + string(x.Cluster.Ready)
		}
		return fmt.Sprintf("%s in %s, which is not Ready: %s", phase(pod), where, msg)
	}
	if x.MemberScheduler != "" {
		return "Pending in " + where + ", its scheduler cannot place it: " + x.MemberScheduler
	}
	if pod.Status.StartTime == nil {
		if e := latest("ProviderCreateFailed", wellknown.EventClaimConflict, wellknown.EventFailedMount, wellknown.EventFailed); e != nil {
			return "Not forwarded to " + where + " yet: " + e.Message
		}
		return "Waiting to be forwarded to " + where
	}
	on := where
	if x.MemberNode != "" {
		on += " on member node " + x.MemberNode
	}
	if podstate.Ready(pod) {
		return "Running in " + on + ", Ready"
	}
	for _, c := range x.Containers {
		if !strings.HasPrefix(c.State, "Running") {
			return fmt.Sprintf("%s in %s, not Ready: container %s %s", phase(pod), on, c.Name, c.State)
		}
	}
	return fmt.Sprintf("%s in %s, not Ready", phase(pod), on)
}

func phase(pod *corev1.Pod) string {
	if pod.Status.Phase == "" {
		return string(corev1.PodPending)
	}
	return string(pod.Status.Phase)
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "Running since " + s.Running.StartedAt.UTC().Format(time.RFC3339)
	case s.Waiting != nil:
		return strings.TrimSpace("Waiting " + s.Waiting.Reason + " " + s.Waiting.Message)
	case s.Terminated != nil:
		return strings.TrimSpace(fmt.Sprintf("Terminated %s (exit %d) %s", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message))
	}
	return "Unknown"
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
			return e.Series.LastObservedTime.Time
		}
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func source(e corev1.Event) string {
	if e.Source.Component != "" {
		return e.Source.Component
	}
	return e.ReportingController
}

func newExplainCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "explain (pod/NAME | deployment/NAME | statefulset/NAME | replicaset/NAME | job/NAME | daemonset/NAME | service/NAME)",
		Short: "Say why a pod is where it is, or why it is not running",
		Long: `Say in one line at the top why a pod runs where it does, or why it does not
run: the policy that placed it, the host scheduler's verdict, the cluster and
member node it runs on, the member scheduler's verdict, the virtual node's
state, and the last events from the host and the member. For a workload, the
same for each of its pods, grouped by what they have in common. For a
Service, whether it is exported or global, its import and conflicts, its
endpoints by cluster, and which members can import it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := hostClient(flags)
			if err != nil {
				return err
			}
			ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
			if err != nil {
				return err
			}
			kind, name, ok := strings.Cut(args[0], "/")
			if !ok {
				kind, name = "pod", args[0]
			}
			var xs []*Explanation
			switch strings.ToLower(kind) {
			case "service", "services", "svc":
				return explainServiceCommand(cmd.Context(), flags, c, streams.Out, ns, name, output)
			case "pod", "pods", "po":
				x, err := Explain(cmd.Context(), c, ns, name)
				if err != nil {
					return err
				}
				xs = append(xs, x)
			default:
				if xs, err = ExplainWorkload(cmd.Context(), c, ns, kind, name); err != nil {
					return err
				}
			}
			return printExplanations(streams.Out, xs, output, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: the text for people)")
	return cmd
}

// ExplainWorkload explains every pod of a workload, found by its selector.
func ExplainWorkload(ctx context.Context, c kubernetes.Interface, ns, kind, name string) ([]*Explanation, error) {
	var selector *metav1.LabelSelector
	switch strings.ToLower(kind) {
	case "deployment", "deployments", "deploy":
		d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		selector = d.Spec.Selector
	case "statefulset", "statefulsets", "sts":
		s, err := c.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		selector = s.Spec.Selector
	case "replicaset", "replicasets", "rs":
		r, err := c.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		selector = r.Spec.Selector
	case "daemonset", "daemonsets", "ds":
		d, err := c.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		selector = d.Spec.Selector
	case "job", "jobs":
		j, err := c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		selector = j.Spec.Selector
	default:
		return nil, fmt.Errorf("explain %s/%s: want pod, deployment, statefulset, replicaset, daemonset or job", kind, name)
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, err
	}
	if sel.Empty() {
		sel = labels.Nothing()
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("%s/%s has no pods", kind, name)
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	var xs []*Explanation
	pre := &preemptions{}
	for i := range pods.Items {
		x, err := explainPod(ctx, c, &pods.Items[i], pre)
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	return xs, nil
}

// printStructured writes v under key as json or yaml when format asks for
// one, and reports whether it did; "" is the text for people, left to the
// caller.
func printStructured(w io.Writer, key string, v any, format string) (bool, error) {
	switch format {
	case "json":
		b, err := json.MarshalIndent(map[string]any{key: v}, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return true, err
	case "yaml":
		b, err := yaml.Marshal(map[string]any{key: v})
		if err != nil {
			return true, err
		}
		_, err = w.Write(b)
		return true, err
	case "":
		return false, nil
	}
	return true, fmt.Errorf("--output %q: want json or yaml", format)
}

// printExplanations writes one explanation in full; several (a
// workload's) grouped by verdict, the first of each group in full.
func printExplanations(w io.Writer, xs []*Explanation, format string, now time.Time) error {
	if done, err := printStructured(w, "pods", xs, format); done || err != nil {
		return err
	}
	if len(xs) == 1 {
		return printExplanation(w, xs[0], now)
	}
	var groups []string
	byVerdict := map[string][]*Explanation{}
	for _, x := range xs {
		key := generalize(x)
		if _, ok := byVerdict[key]; !ok {
			groups = append(groups, key)
		}
		byVerdict[key] = append(byVerdict[key], x)
	}
	for i, key := range groups {
		g := byVerdict[key]
		var names []string
		for _, x := range g {
			names = append(names, x.Name)
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%d of %d pods: %s\n  %s\n\n", len(g), len(xs), key, strings.Join(names, " "))
		if err := printExplanation(w, g[0], now); err != nil {
			return err
		}
	}
	return nil
}

// generalize is a verdict without what differs between the pods of one
// group (the member node).
func generalize(x *Explanation) string {
	if x.MemberNode != "" {
		return strings.Replace(x.Verdict, " on member node "+x.MemberNode, "", 1)
	}
	return x.Verdict
}

func printExplanation(w io.Writer, x *Explanation, now time.Time) error {
	fmt.Fprintf(w, "%s/%s: %s\n\n", x.Namespace, x.Name, x.Verdict)
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-17s %s\n", k+":", v)
		}
	}
	fmt.Fprintln(w, "Placement")
	if x.Policy != "" {
		p := x.Policy
		if x.PolicyCluster != "" {
			p += ", assigned to " + x.PolicyCluster
		}
		line("Policy", p)
	} else {
		line("Policy", "none (placed by the host scheduler alone)")
	}
	line("Overrides", x.Overrides)
	line("Left out", x.FitVerdict)
	line("Node features", featuresLine(x.NodeFeatures))
	line("Host scheduler", x.HostScheduler)
	if len(x.Preempted) > 0 {
		line("Preempted", strings.Join(x.Preempted, ", ")+" (lower priority, to make room for this pod)")
	}
	if x.HostNode != "" {
		line("Host node", x.HostNode)
	}
	if c := x.Cluster; c != nil {
		fmt.Fprintln(w, "Cluster")
		state := string(c.Ready)
		if c.ReadyMessage != "" {
			state += ": " + c.ReadyMessage
		}
		line("Virtual node", fmt.Sprintf("%s (member %s, %s mode)", c.Name, dash(c.Member), dash(c.Mode)))
		line("Ready", state)
		if c.KubeletAPI != "" {
			line("Kubelet API", strings.TrimSpace(c.KubeletAPI+" "+c.KubeletAPIMessage))
		}
		line("Heartbeat", age(c.Heartbeat, now)+" ago")
		fmt.Fprintln(w, "Member")
		line("Namespace", dash(x.MemberNamespace))
		line("Node", dash(x.MemberNode))
		line("Scheduler", x.MemberScheduler)
		for _, ct := range x.Containers {
			line("Container "+ct.Name, fmt.Sprintf("%s, %d restarts", ct.State, ct.Restarts))
		}
	}
	if len(x.Events) > 0 {
		fmt.Fprintln(w, "Events (host and member, oldest first)")
	}
	for _, e := range x.Events {
		fmt.Fprintf(w, "  %-6s %-8s %-24s %-22s %s\n", duration.HumanDuration(now.Sub(e.Time.Time)), e.Type, e.Reason, e.From, oneLine(e.Message))
	}
	return nil
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// This file explains a host Service across the fleet: whether it is
// exported (Multi-Cluster Services) or global, what the broker made of it
// (ServiceImport, conflicts), which cluster holds which endpoints, and
// which members can import it. It reads the host only, as the rest of
// explain does.

package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
)

// ServiceExplanation is what `kubectl flotilla explain service/NAME` says
// about one host Service.
type ServiceExplanation struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Verdict is the one line that says whether and where the fleet
	// sees the Service.
	Verdict string `json:"verdict"`
	// Service is the host Service; nil when the host has none of the name.
	Service *ServiceSpec `json:"service,omitempty"`
	// Global is true when the Service carries wellknown.GlobalAnnotation.
	Global bool `json:"global"`
	// MCSUnavailable says why the host does not serve the Multi-Cluster
	// Services API; empty when it does.
	MCSUnavailable string `json:"mcsUnavailable,omitempty"`
	// Export is the host's ServiceExport; nil when there is none.
	Export *ExportState `json:"export,omitempty"`
	// Import is the broker's ServiceImport; nil when there is none.
	Import *ImportState `json:"import,omitempty"`
	// EndpointsFrom says which slices Endpoints were read from.
	EndpointsFrom string            `json:"endpointsFrom"`
	Endpoints     []ServiceEndpoint `json:"endpoints,omitempty"`
	// Clusters says, per virtual node, whether its member can import the
	// Service.
	Clusters []ClusterImport `json:"clusters,omitempty"`
}

// ServiceSpec is the part of a Service that exports compare.
type ServiceSpec struct {
	Type      corev1.ServiceType `json:"type"`
	ClusterIP string             `json:"clusterIP,omitempty"`
	Headless  bool               `json:"headless"`
	Ports     []string           `json:"ports,omitempty"`
}

// ExportState is a ServiceExport's conditions, Valid, Ready and Conflict
// first.
type ExportState struct {
	Generation int64              `json:"generation"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ImportState is the broker's ServiceImport: what every importing member
// gets, and which exports lost a conflict.
type ImportState struct {
	Type     mcsv1beta1.ServiceImportType `json:"type"`
	Ports    []string                     `json:"ports,omitempty"`
	Clusters []string                     `json:"clusters,omitempty"`
	// MemberExports are the clusters that export the Service from their
	// own ServiceExport, as their relayed slices say.
	MemberExports []string `json:"memberExports,omitempty"`
	// Conflicts is the decoded wellknown.ImportConflictsAnnotation;
	// ConflictsError says why it could not be decoded.
	Conflicts      map[string]mcs.Conflict `json:"conflicts,omitempty"`
	ConflictsError string                  `json:"conflictsError,omitempty"`
}

// ServiceEndpoint is one endpoint of the Service, in the cluster it runs in.
type ServiceEndpoint struct {
	Cluster     string   `json:"cluster"`
	Addresses   []string `json:"addresses"`
	Ready       bool     `json:"ready"`
	Serving     bool     `json:"serving"`
	Terminating bool     `json:"terminating"`
	Hostname    string   `json:"hostname,omitempty"`
	Pod         string   `json:"pod,omitempty"`
	// From says which slice holds it: a forwarded pod (the broker's), a
	// member's own export (relayed by flotilla-node), or the host's own.
	From string `json:"from"`
}

// ClusterImport says whether the member behind a virtual node can import
// the Service, and, for a global one, what its mirror carries.
type ClusterImport struct {
	Cluster string `json:"cluster"`
	Imports bool   `json:"imports"`
	Why     string `json:"why,omitempty"`
	Mirror  string `json:"mirror,omitempty"`
}

// Where an endpoint comes from, by the slice that holds it.
const (
	fromForwarded = "forwarded pod"
	fromMember    = "member export"
	fromHost      = "host slice"
)

// serviceState is what the host holds about one Service name.
type serviceState struct {
	ns, name string
	svc      *corev1.Service
	// mcsMissing says why the host does not serve the MCS API, or "".
	mcsMissing string
	export     *mcsv1beta1.ServiceExport
	imp        *mcsv1beta1.ServiceImport
	// mcsSlices are labelled with the MCS service name, hostSlices with
	// the Service's own.
	mcsSlices, hostSlices []discoveryv1.EndpointSlice
	nodes                 []corev1.Node
}

// explainServiceCommand is `explain service/NAME`.
func explainServiceCommand(ctx context.Context, flags *genericclioptions.ConfigFlags, c kubernetes.Interface, w io.Writer, ns, name, output string) error {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return err
	}
	mc, err := mcsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	x, err := ExplainService(ctx, c, mc, ns, name)
	if err != nil {
		return err
	}
	return printServiceExplanation(w, x, output)
}

// ExplainService gathers what the host knows of Service ns/name: the
// Service, its ServiceExport and ServiceImport, its EndpointSlices and the
// virtual nodes. A missing Service is explained when an export or import
// of its name exists.
func ExplainService(ctx context.Context, c kubernetes.Interface, mc mcsclient.Interface, ns, name string) (*ServiceExplanation, error) {
	s, err := readService(ctx, c, mc, ns, name)
	if err != nil {
		return nil, err
	}
	if s.svc == nil && s.export == nil && s.imp == nil {
		return nil, apierrors.NewNotFound(corev1.Resource("services"), name)
	}
	return explainService(s), nil
}

// readService reads what the host holds of Service name ns/name; the
// Multi-Cluster Services kinds only when the host serves them.
func readService(ctx context.Context, c kubernetes.Interface, mc mcsclient.Interface, ns, name string) (*serviceState, error) {
	s := &serviceState{ns: ns, name: name}
	svc, err := c.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		s.svc = svc
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("service %s/%s: %w", ns, name, err)
	}
	if s.mcsMissing, err = mcsServed(c); err != nil {
		return nil, err
	}
	if s.mcsMissing == "" {
		if s.export, err = getIfExists(mc.MulticlusterV1beta1().ServiceExports(ns).Get(ctx, name, metav1.GetOptions{})); err != nil {
			return nil, fmt.Errorf("serviceexport %s/%s: %w", ns, name, err)
		}
		if s.imp, err = getIfExists(mc.MulticlusterV1beta1().ServiceImports(ns).Get(ctx, name, metav1.GetOptions{})); err != nil {
			return nil, fmt.Errorf("serviceimport %s/%s: %w", ns, name, err)
		}
	}
	for _, l := range []struct {
		key  string
		into *[]discoveryv1.EndpointSlice
	}{{mcsv1beta1.LabelServiceName, &s.mcsSlices}, {discoveryv1.LabelServiceName, &s.hostSlices}} {
		list, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: l.key + "=" + name})
		if err != nil {
			return nil, fmt.Errorf("endpointslices of %s/%s: %w", ns, name, err)
		}
		*l.into = list.Items
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: wellknown.ClusterLabel})
	if err != nil {
		return nil, fmt.Errorf("list virtual nodes: %w", err)
	}
	s.nodes = nodes.Items
	slices.SortFunc(s.nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return s, nil
}

// getIfExists is a Get's object, or nil when it is not found.
func getIfExists[T any](obj *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

// mcsServed says why the host does not serve ServiceExport and
// ServiceImport, or "" when it serves both.
func mcsServed(c kubernetes.Interface) (string, error) {
	gv := mcsv1beta1.GroupVersion.String()
	list, err := c.Discovery().ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return "the host does not serve " + gv + " (the ServiceExport and ServiceImport CRDs are not installed)", nil
	}
	if err != nil {
		return "", fmt.Errorf("discover %s: %w", gv, err)
	}
	var missing []string
	for _, r := range []string{mcsv1beta1.ServiceExportPluralName, mcsv1beta1.ServiceImportPluralName} {
		if !slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == r }) {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return "the host does not serve " + strings.Join(missing, " or ") + " of " + gv, nil
	}
	return "", nil
}

// explainService is ExplainService's reasoning, on what was read.
func explainService(s *serviceState) *ServiceExplanation {
	x := &ServiceExplanation{Namespace: s.ns, Name: s.name, MCSUnavailable: s.mcsMissing}
	if s.svc != nil {
		x.Service = serviceSpec(s.svc)
		x.Global = s.svc.Annotations[wellknown.GlobalAnnotation] == "true"
	}
	if e := s.export; e != nil {
		x.Export = &ExportState{Generation: e.Generation, Conditions: exportConditions(e.Status.Conditions)}
	}
	if s.imp != nil {
		x.Import = importState(s.imp, s.mcsSlices)
	}
	if x.Export != nil || x.Import != nil || x.Global {
		x.EndpointsFrom = "the broker's and relayed slices (" + mcsv1beta1.LabelServiceName + "=" + s.name + ")"
		x.Endpoints = mcsEndpoints(s.mcsSlices)
	} else {
		x.EndpointsFrom = "the host's own slices (" + discoveryv1.LabelServiceName + "=" + s.name + ")"
		x.Endpoints = hostEndpoints(s.hostSlices, s.nodes)
	}
	for i := range s.nodes {
		x.Clusters = append(x.Clusters, clusterImport(&s.nodes[i], s.ns, s.name, x.Global, x.Endpoints))
	}
	x.Verdict = serviceVerdict(x)
	return x
}

func serviceSpec(svc *corev1.Service) *ServiceSpec {
	typ := svc.Spec.Type
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	out := &ServiceSpec{Type: typ, ClusterIP: svc.Spec.ClusterIP, Headless: svc.Spec.ClusterIP == corev1.ClusterIPNone}
	for _, p := range svc.Spec.Ports {
		s := portString(p.Name, p.Port, p.Protocol)
		if p.TargetPort.String() != "0" && p.TargetPort.String() != strconv.Itoa(int(p.Port)) {
			s += " -> " + p.TargetPort.String()
		}
		out.Ports = append(out.Ports, s)
	}
	return out
}

// portString is a port as kubectl prints it (80/TCP), after its name.
func portString(name string, port int32, protocol corev1.Protocol) string {
	if protocol == "" {
		protocol = corev1.ProtocolTCP
	}
	s := fmt.Sprintf("%d/%s", port, protocol)
	if name != "" {
		s = name + " " + s
	}
	return s
}

// exportConditions are conds with the API's three (Valid, Ready,
// Conflict) first, in that order.
func exportConditions(conds []metav1.Condition) []metav1.Condition {
	order := []string{string(mcsv1beta1.ServiceExportConditionValid), string(mcsv1beta1.ServiceExportConditionReady), string(mcsv1beta1.ServiceExportConditionConflict)}
	rank := func(t string) int {
		if i := slices.Index(order, t); i >= 0 {
			return i
		}
		return len(order)
	}
	out := slices.Clone(conds)
	slices.SortStableFunc(out, func(a, b metav1.Condition) int { return rank(a.Type) - rank(b.Type) })
	return out
}

func importState(imp *mcsv1beta1.ServiceImport, mcsSlices []discoveryv1.EndpointSlice) *ImportState {
	st := &ImportState{Type: imp.Spec.Type}
	for _, p := range imp.Spec.Ports {
		st.Ports = append(st.Ports, portString(p.Name, p.Port, p.Protocol))
	}
	for _, c := range imp.Status.Clusters {
		st.Clusters = append(st.Clusters, c.Cluster)
	}
	for _, sl := range mcsSlices {
		if sl.Labels[discoveryv1.LabelManagedBy] != wellknown.RelayManagedBy {
			continue
		}
		if e, err := mcs.DecodeExport(sl.Annotations[wellknown.ExportAnnotation]); err == nil && !slices.Contains(st.MemberExports, e.Cluster) {
			st.MemberExports = append(st.MemberExports, e.Cluster)
		}
	}
	slices.Sort(st.MemberExports)
	if a, ok := imp.Annotations[wellknown.ImportConflictsAnnotation]; ok {
		if err := json.Unmarshal([]byte(a), &st.Conflicts); err != nil {
			st.ConflictsError = fmt.Sprintf("cannot read annotation %s: %v", wellknown.ImportConflictsAnnotation, err)
		}
	}
	return st
}

// mcsEndpoints are the endpoints of the slices the broker and
// flotilla-node keep, each in the cluster its slice names.
func mcsEndpoints(sls []discoveryv1.EndpointSlice) []ServiceEndpoint {
	var out []ServiceEndpoint
	for _, sl := range sls {
		from := sl.Labels[discoveryv1.LabelManagedBy]
		switch from {
		case wellknown.BrokerManagedBy:
			from = fromForwarded
		case wellknown.RelayManagedBy:
			from = fromMember
		}
		for _, ep := range sl.Endpoints {
			out = append(out, endpoint(sl.Labels[mcsv1beta1.LabelSourceCluster], from, ep))
		}
	}
	sortEndpoints(out)
	return out
}

// hostEndpoints are the endpoints of the host's own slices, each in the
// cluster of its node: a virtual node's name, or the host node's.
func hostEndpoints(sls []discoveryv1.EndpointSlice, nodes []corev1.Node) []ServiceEndpoint {
	var out []ServiceEndpoint
	for _, sl := range sls {
		for _, ep := range sl.Endpoints {
			cluster := "-"
			if ep.NodeName != nil {
				cluster = "host node " + *ep.NodeName
				if slices.ContainsFunc(nodes, func(n corev1.Node) bool { return n.Name == *ep.NodeName }) {
					cluster = *ep.NodeName
				}
			}
			out = append(out, endpoint(cluster, fromHost, ep))
		}
	}
	sortEndpoints(out)
	return out
}

// endpoint reads ep's conditions as discovery/v1 says consumers must: an
// unknown ready or serving is true, an unknown terminating false.
func endpoint(cluster, from string, ep discoveryv1.Endpoint) ServiceEndpoint {
	e := ServiceEndpoint{Cluster: cluster, Addresses: ep.Addresses, From: from,
		Ready:       ep.Conditions.Ready == nil || *ep.Conditions.Ready,
		Serving:     ep.Conditions.Serving == nil || *ep.Conditions.Serving,
		Terminating: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating,
	}
	if ep.Hostname != nil {
		e.Hostname = *ep.Hostname
	}
	if r := ep.TargetRef; r != nil {
		e.Pod = r.Name
		if r.Kind != "" && r.Kind != "Pod" {
			e.Pod = r.Kind + "/" + r.Name
		}
	}
	return e
}

func sortEndpoints(eps []ServiceEndpoint) {
	slices.SortStableFunc(eps, func(a, b ServiceEndpoint) int {
		if c := strings.Compare(a.Cluster, b.Cluster); c != 0 {
			return c
		}
		return strings.Compare(a.Pod, b.Pod)
	})
}

// clusterImport says whether the member behind virtual node n can import
// Service ns/name, as the broker decides its export's Ready condition;
// for a global Service, also what n's mirror carries.
func clusterImport(n *corev1.Node, ns, name string, global bool, eps []ServiceEndpoint) ClusterImport {
	ci := ClusterImport{Cluster: n.Name, Imports: true}
	memberNS := ns
	if n.Annotations[wellknown.NamespaceMappingAnnotation] == "Suffix" {
		memberNS = ns + "-" + n.Name
		ci.Imports = false
		ci.Why = fmt.Sprintf("%s: maps %s to %s, breaking MCS namespace sameness; global mode still mirrors it under that name",
			wellknown.ReasonNamespaceNotSame, ns, memberNS)
	} else if a, ok := n.Annotations[wellknown.MultiClusterServicesAnnotation]; ok && a != mcsv1beta1.GroupVersion.Version {
		ci.Imports = false
		ci.Why = fmt.Sprintf("%s: its member does not serve ServiceImport %s: %q", wellknown.ReasonImportUnavailable, mcsv1beta1.GroupVersion.Version, a)
	}
	if global {
		var others []string
		for _, e := range eps {
			if e.Cluster != n.Name && !slices.Contains(others, e.Cluster) {
				others = append(others, e.Cluster)
			}
		}
		ci.Mirror = memberNS + "/" + name + " with the endpoints of " + orNone(others, "no other cluster")
	}
	return ci
}

// serviceVerdict is the line at the top: whether the fleet sees the
// Service, and where its endpoints are.
func serviceVerdict(x *ServiceExplanation) string {
	key := x.Namespace + "/" + x.Name
	valid := exportCondition(x.Export, mcsv1beta1.ServiceExportConditionValid)
	switch {
	case valid != nil && valid.Status == metav1.ConditionFalse:
		return "Not exported: ServiceExport " + key + " is not valid: " + valid.Reason + ": " + valid.Message
	case x.Export != nil && valid == nil:
		return "Exported, waiting for the broker (flotilla-policy): ServiceExport " + key + " has no conditions yet"
	case x.Service == nil && x.Import == nil:
		return "No Service " + key + " in the host, and no import of it"
	case x.Service == nil:
		return "No Service " + key + " in the host; imported from the exports of " + orNone(x.Import.MemberExports, "no cluster")
	}
	var how string
	switch {
	case x.Export != nil && x.Global:
		how = "Exported and global"
	case x.Export != nil:
		how = "Exported"
	case x.Import != nil && x.Global:
		how = "Global, and exported by " + orNone(x.Import.MemberExports, "no cluster")
	case x.Import != nil:
		how = "Exported by " + orNone(x.Import.MemberExports, "no cluster")
	case x.Global:
		how = "Global"
	default:
		// Still mirrored where its pods run, with those pods only.
		how = "Neither exported nor global, a member sees only its own endpoints"
		if x.MCSUnavailable != "" {
			how = "Neither global nor exportable (the host does not serve the Multi-Cluster Services API), a member sees only its own endpoints"
		}
		return how + ": " + endpointsSummary(x.Endpoints)
	}
	var parts []string
	if x.Export != nil || x.Import != nil {
		var not []string
		for _, c := range x.Clusters {
			if !c.Imports {
				not = append(not, c.Cluster)
			}
		}
		p := fmt.Sprintf("imported by %d of %d clusters", len(x.Clusters)-len(not), len(x.Clusters))
		if len(not) > 0 {
			p += " (not " + strings.Join(not, ", ") + ")"
		}
		parts = append(parts, p)
	}
	if x.Global {
		parts = append(parts, "mirrored into every cluster")
	}
	parts = append(parts, endpointsSummary(x.Endpoints))
	if x.Import != nil && len(x.Import.Conflicts) > 0 {
		var cs []string
		for _, c := range sortedKeys(x.Import.Conflicts) {
			cs = append(cs, c+" ("+string(x.Import.Conflicts[c].Reason)+")")
		}
		parts = append(parts, "in conflict: "+strings.Join(cs, ", "))
	}
	return how + ": " + strings.Join(parts, "; ")
}

// exportCondition is the condition t of an export, or nil.
func exportCondition(e *ExportState, t mcsv1beta1.ServiceExportConditionType) *metav1.Condition {
	if e == nil {
		return nil
	}
	for i := range e.Conditions {
		if e.Conditions[i].Type == string(t) {
			return &e.Conditions[i]
		}
	}
	return nil
}

// endpointsSummary counts the ready endpoints and names their clusters.
func endpointsSummary(eps []ServiceEndpoint) string {
	n := 0
	var in []string
	for _, e := range eps {
		if e.Ready {
			n++
			if !slices.Contains(in, e.Cluster) {
				in = append(in, e.Cluster)
			}
		}
	}
	switch n {
	case 0:
		return "no ready endpoints"
	case 1:
		return "1 ready endpoint in " + in[0]
	}
	return fmt.Sprintf("%d ready endpoints in %s", n, strings.Join(in, ", "))
}

func orNone(names []string, none string) string {
	if len(names) == 0 {
		return none
	}
	return strings.Join(names, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// printServiceExplanation writes x in format: the text for people, json
// or yaml.
func printServiceExplanation(w io.Writer, x *ServiceExplanation, format string) error {
	if done, err := printStructured(w, "service", x, format); done || err != nil {
		return err
	}
	key := x.Namespace + "/" + x.Name
	fmt.Fprintf(w, "service %s: %s\n\n", key, x.Verdict)
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-17s %s\n", k+":", v)
		}
	}
	fmt.Fprintln(w, "Service")
	if s := x.Service; s != nil {
		typ := string(s.Type)
		if s.Headless {
			typ += ", headless"
		} else if s.ClusterIP != "" {
			typ += " " + s.ClusterIP
		}
		line("Type", typ)
		line("Ports", dash(strings.Join(s.Ports, ", ")))
		if x.Global {
			line("Global", fmt.Sprintf("yes (%s: \"true\"): mirrored into every cluster with every cluster's endpoints", wellknown.GlobalAnnotation))
		} else {
			line("Global", "no")
		}
	} else {
		line("Service", "none: the host has no Service "+key)
	}
	printExport(w, line, x)
	printEndpoints(w, x)
	printClusterImports(w, x)
	return nil
}

func printExport(w io.Writer, line func(k, v string), x *ServiceExplanation) {
	key := x.Namespace + "/" + x.Name
	fmt.Fprintln(w, "Export")
	if x.MCSUnavailable != "" {
		line("MCS API", x.MCSUnavailable+": no export, no import")
		return
	}
	if e := x.Export; e != nil {
		line("ServiceExport", key)
		if len(e.Conditions) == 0 {
			line("Conditions", "none yet: the broker (flotilla-policy) has not written them")
		}
		for _, c := range e.Conditions {
			v := string(c.Status) + ", " + c.Reason
			if c.Message != "" {
				v += ": " + c.Message
			}
			if c.ObservedGeneration != 0 && c.ObservedGeneration != e.Generation {
				v += fmt.Sprintf(" (of generation %d; the export is at %d)", c.ObservedGeneration, e.Generation)
			}
			line(c.Type, v)
		}
	} else {
		line("ServiceExport", "none: not exported from the host")
	}
	fmt.Fprintln(w, "Import")
	im := x.Import
	if im == nil {
		line("ServiceImport", "none: the broker makes one for a valid export")
		return
	}
	line("ServiceImport", key+", "+string(im.Type))
	line("Ports", dash(strings.Join(im.Ports, ", ")))
	line("Clusters", dash(strings.Join(im.Clusters, ", ")))
	line("Member exports", strings.Join(im.MemberExports, ", "))
	line("In conflict", im.ConflictsError)
	for _, c := range sortedKeys(im.Conflicts) {
		line("In conflict", c+": "+string(im.Conflicts[c].Reason)+": "+im.Conflicts[c].Message)
	}
}

func printEndpoints(w io.Writer, x *ServiceExplanation) {
	fmt.Fprintln(w, "Endpoints, from "+x.EndpointsFrom)
	if len(x.Endpoints) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  CLUSTER\tADDRESSES\tREADY\tSERVING\tTERMINATING\tHOSTNAME\tPOD\tFROM")
	for _, e := range x.Endpoints {
		fmt.Fprintf(tw, "  %s\t%s\t%t\t%t\t%t\t%s\t%s\t%s\n", e.Cluster, dash(strings.Join(e.Addresses, ",")),
			e.Ready, e.Serving, e.Terminating, dash(e.Hostname), dash(e.Pod), e.From)
	}
	tw.Flush()
}

func printClusterImports(w io.Writer, x *ServiceExplanation) {
	if x.Export != nil || x.Import != nil {
		fmt.Fprintln(w, "Import by cluster")
	} else {
		fmt.Fprintln(w, "Import by cluster, once exported")
	}
	if len(x.Clusters) == 0 {
		fmt.Fprintln(w, "  none: the host has no virtual nodes")
		return
	}
	width := 17
	for _, c := range x.Clusters {
		width = max(width, len(c.Cluster)+1)
	}
	for _, c := range x.Clusters {
		v := "yes"
		switch {
		case !c.Imports && c.Mirror != "":
			v = "no, " + c.Why + ": " + c.Mirror
		case !c.Imports:
			v = "no, " + c.Why
		case c.Mirror != "":
			v += "; its global mirror is " + c.Mirror
		}
		fmt.Fprintf(w, "  %-*s %s\n", width, c.Cluster+":", v)
	}
}

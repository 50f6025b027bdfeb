package mcs

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Conflict is why an export is in conflict: the reason and message of the
// Conflict condition its ServiceExport gets.
type Conflict struct {
	Reason  mcsv1beta1.ServiceExportConditionReason `json:"reason"`
	Message string                                  `json:"message"`
}

// Resolution is what the exports of one Service name across the fleet come
// to: the ServiceImport every cluster gets, and the exports in conflict.
type Resolution struct {
	// Spec is the imported Service: the oldest export's properties, and
	// the union of all exports' ports by name, a name (or a number and
	// protocol) declared differently taken from the oldest export that
	// declares it. Its IPs are left to
	// each importing cluster.
	Spec mcsv1beta1.ServiceImportSpec
	// Labels and Annotations are the oldest export's exported ones, whole.
	Labels, Annotations map[string]string
	// Clusters are the exporting clusters, sorted.
	Clusters []string
	// Conflicts holds, by cluster, the exports in conflict: when the
	// exports disagree on a property, every one of them is, the oldest
	// (whose value is used) included, as the API's conformance suite
	// expects.
	Conflicts map[string]Conflict
}

// aspect is one property the exports must agree on.
type aspect struct {
	reason mcsv1beta1.ServiceExportConditionReason
	what   string
	same   func(a, b Export) bool
}

var aspects = []aspect{
	{mcsv1beta1.ServiceExportReasonTypeConflict, "type", func(a, b Export) bool { return a.Type == b.Type }},
	{mcsv1beta1.ServiceExportReasonPortConflict, "ports", func(a, b Export) bool { return samePorts(a.Ports, b.Ports) }},
	{mcsv1beta1.ServiceExportReasonSessionAffinityConflict, "session affinity",
		func(a, b Export) bool { return a.SessionAffinity == b.SessionAffinity }},
	{mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict, "session affinity config", func(a, b Export) bool {
		return a.SessionAffinity != b.SessionAffinity || equality.Semantic.DeepEqual(a.SessionAffinityConfig, b.SessionAffinityConfig)
	}},
	{mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict, "internal traffic policy",
		func(a, b Export) bool {
			return equality.Semantic.DeepEqual(a.InternalTrafficPolicy, b.InternalTrafficPolicy)
		}},
	{mcsv1beta1.ServiceExportReasonTrafficDistributionConflict, "traffic distribution",
		func(a, b Export) bool {
			return equality.Semantic.DeepEqual(a.TrafficDistribution, b.TrafficDistribution)
		}},
	{mcsv1beta1.ServiceExportReasonIPFamilyConflict, "IP families",
		func(a, b Export) bool { return slices.Equal(a.IPFamilies, b.IPFamilies) }},
	{mcsv1beta1.ServiceExportReasonLabelsConflict, "exported labels", func(a, b Export) bool { return maps.Equal(a.Labels, b.Labels) }},
	{mcsv1beta1.ServiceExportReasonAnnotationsConflict, "exported annotations",
		func(a, b Export) bool { return maps.Equal(a.Annotations, b.Annotations) }},
}

// Resolve merges the exports of one Service name as KEP-1645 says: where
// exports disagree, the oldest export (by creation time, then cluster
// name) wins, ports are merged by name, and every export of a name whose
// exports disagree is in conflict.
func Resolve(exports []Export) Resolution {
	var r Resolution
	if len(exports) == 0 {
		return r
	}
	exports = slices.Clone(exports)
	slices.SortFunc(exports, func(a, b Export) int {
		if c := a.Created.Time.Compare(b.Created.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Cluster, b.Cluster)
	})
	oldest := exports[0]
	r.Spec = mcsv1beta1.ServiceImportSpec{
		Type: oldest.Type, SessionAffinity: oldest.SessionAffinity,
		SessionAffinityConfig: oldest.SessionAffinityConfig.DeepCopy(),
		InternalTrafficPolicy: oldest.InternalTrafficPolicy, TrafficDistribution: oldest.TrafficDistribution,
		IPFamilies: slices.Clone(oldest.IPFamilies),
	}
	r.Labels, r.Annotations = maps.Clone(oldest.Labels), maps.Clone(oldest.Annotations)
	for _, e := range exports {
		r.Clusters = append(r.Clusters, e.Cluster)
		// A port joins the union unless its name, or its number and
		// protocol, are an older export's already.
		for _, p := range e.Ports {
			if !slices.ContainsFunc(r.Spec.Ports, func(q mcsv1beta1.ServicePort) bool {
				return q.Name == p.Name || (q.Port == p.Port && protocol(q) == protocol(p))
			}) {
				r.Spec.Ports = append(r.Spec.Ports, p)
			}
		}
	}
	slices.SortFunc(r.Spec.Ports, func(a, b mcsv1beta1.ServicePort) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(r.Clusters)
	r.Clusters = slices.Compact(r.Clusters)

	var reasons []string
	var what []string
	for _, a := range aspects {
		if !slices.ContainsFunc(exports[1:], func(e Export) bool { return !a.same(oldest, e) }) {
			continue
		}
		reasons = append(reasons, string(a.reason))
		what = append(what, a.what)
	}
	if len(reasons) == 0 {
		return r
	}
	c := Conflict{
		Reason: mcsv1beta1.ServiceExportConditionReason(strings.Join(reasons, ",")),
		Message: fmt.Sprintf("the exports of clusters %s differ in %s; the oldest export's, in cluster %s, are used",
			strings.Join(r.Clusters, ", "), strings.Join(what, ", "), oldest.Cluster),
	}
	r.Conflicts = map[string]Conflict{}
	for _, e := range exports {
		r.Conflicts[e.Cluster] = c
	}
	return r
}

// samePorts reports whether two exports declare the same ports, by name.
func samePorts(a, b []mcsv1beta1.ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	for _, p := range a {
		i := slices.IndexFunc(b, func(q mcsv1beta1.ServicePort) bool { return q.Name == p.Name })
		if i < 0 || !samePort(p, b[i]) {
			return false
		}
	}
	return true
}

func samePort(a, b mcsv1beta1.ServicePort) bool {
	return a.Port == b.Port && protocol(a) == protocol(b) && equality.Semantic.DeepEqual(a.AppProtocol, b.AppProtocol)
}

func protocol(p mcsv1beta1.ServicePort) corev1.Protocol {
	if p.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return p.Protocol
}

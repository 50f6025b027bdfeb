package mcs

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Conflict is why one export lost to an older one: the reason and message
// of the Conflict condition its ServiceExport gets.
type Conflict struct {
	Reason  mcsv1beta1.ServiceExportConditionReason `json:"reason"`
	Message string                                  `json:"message"`
}

// Resolution is what the exports of one Service name across the fleet come
// to: the ServiceImport every cluster gets, and the exports that conflict.
type Resolution struct {
	// Spec is the imported Service: the oldest export's type and session
	// affinity, and the union of all exports' ports, a port declared
	// differently taken from the oldest export that declares it.
	Spec mcsv1beta1.ServiceImportSpec
	// Clusters are the exporting clusters, sorted.
	Clusters []string
	// Conflicts holds, by cluster, the exports that declare something
	// differently from an older one.
	Conflicts map[string]Conflict
}

// Resolve merges the exports of one Service name as KEP-1645 says: where
// exports disagree, the oldest export (by creation time, then cluster
// name) wins, and each newer export that disagrees is in conflict.
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
	}
	// declaredBy remembers which cluster's declaration each accepted port is.
	declaredBy := map[portKey]string{}
	for _, e := range exports {
		r.Clusters = append(r.Clusters, e.Cluster)
		var why []string
		var reason mcsv1beta1.ServiceExportConditionReason
		note := func(rs mcsv1beta1.ServiceExportConditionReason, format string, args ...any) {
			if reason == "" {
				reason = rs
			}
			why = append(why, fmt.Sprintf(format, args...))
		}
		if e.Type != oldest.Type {
			note(mcsv1beta1.ServiceExportReasonTypeConflict, "type %s differs from %s", e.Type, oldest.Type)
		}
		if e.SessionAffinity != oldest.SessionAffinity {
			note(mcsv1beta1.ServiceExportReasonSessionAffinityConflict, "session affinity %s differs from %s", e.SessionAffinity, oldest.SessionAffinity)
		} else if !equality.Semantic.DeepEqual(e.SessionAffinityConfig, oldest.SessionAffinityConfig) {
			note(mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict, "session affinity config differs")
		}
		for _, p := range e.Ports {
			if q, ok := declaredPort(r.Spec.Ports, e, p); ok {
				if !samePort(p, q) {
					note(mcsv1beta1.ServiceExportReasonPortConflict, "port %d is %s but %s in cluster %s", p.Port, describePort(p), describePort(q), declaredBy[keyOf(q)])
				}
				continue
			}
			if p.Name != "" && slices.ContainsFunc(r.Spec.Ports, func(q mcsv1beta1.ServicePort) bool { return q.Name == p.Name }) {
				note(mcsv1beta1.ServiceExportReasonPortConflict, "port name %q is taken by another port number", p.Name)
				continue
			}
			r.Spec.Ports = append(r.Spec.Ports, p)
			declaredBy[keyOf(p)] = e.Cluster
		}
		if reason != "" {
			if r.Conflicts == nil {
				r.Conflicts = map[string]Conflict{}
			}
			r.Conflicts[e.Cluster] = Conflict{Reason: reason, Message: fmt.Sprintf(
				"%s; the oldest export, in cluster %s, is used", strings.Join(why, "; "), oldest.Cluster)}
		}
	}
	slices.SortFunc(r.Spec.Ports, comparePorts)
	slices.Sort(r.Clusters)
	r.Clusters = slices.Compact(r.Clusters)
	return r
}

// portKey is what tells two ports of one Service apart: a Service may
// serve one port number over TCP and UDP (DNS does).
type portKey struct {
	port     int32
	protocol corev1.Protocol
}

func keyOf(p mcsv1beta1.ServicePort) portKey { return portKey{p.Port, protocol(p)} }

// declaredPort is the accepted port that p of export e declares again: the
// one of the same number and protocol, or, when e does not itself serve
// that number over the accepted protocol, the one of the same number (a
// port moved to another protocol), which p then conflicts with.
func declaredPort(accepted []mcsv1beta1.ServicePort, e Export, p mcsv1beta1.ServicePort) (mcsv1beta1.ServicePort, bool) {
	if i := slices.IndexFunc(accepted, func(q mcsv1beta1.ServicePort) bool { return keyOf(q) == keyOf(p) }); i >= 0 {
		return accepted[i], true
	}
	for _, q := range accepted {
		if q.Port == p.Port && !slices.ContainsFunc(e.Ports, func(o mcsv1beta1.ServicePort) bool { return keyOf(o) == keyOf(q) }) {
			return q, true
		}
	}
	return mcsv1beta1.ServicePort{}, false
}

// comparePorts orders ports by number, then protocol.
func comparePorts(a, b mcsv1beta1.ServicePort) int {
	if c := cmp.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	return cmp.Compare(protocol(a), protocol(b))
}

func samePort(a, b mcsv1beta1.ServicePort) bool {
	return a.Name == b.Name && protocol(a) == protocol(b) && equality.Semantic.DeepEqual(a.AppProtocol, b.AppProtocol)
}

func protocol(p mcsv1beta1.ServicePort) corev1.Protocol {
	if p.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return p.Protocol
}

func describePort(p mcsv1beta1.ServicePort) string {
	s := string(protocol(p))
	if p.Name != "" {
		s = fmt.Sprintf("%q/%s", p.Name, s)
	}
	if p.AppProtocol != nil {
		s += " (" + *p.AppProtocol + ")"
	}
	return s
}

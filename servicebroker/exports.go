// The exports of one Service name: the host's own, and those
// flotilla-node relays from members.

package servicebroker

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
)

// validity says whether the host Service can be exported: the reason and
// message of the host export's Valid condition.
func (s *state) validity() (ok bool, reason mcsv1beta1.ServiceExportConditionReason, message string) {
	if s.service == nil {
		return false, mcsv1beta1.ServiceExportReasonNoService, fmt.Sprintf("there is no Service %s in the host to export", s.key)
	}
	if err := mcs.Exportable(s.service); err != nil {
		return false, mcsv1beta1.ServiceExportReasonInvalidServiceType, err.Error()
	}
	return true, mcsv1beta1.ServiceExportReasonValid, fmt.Sprintf("Service %s is exported", s.key)
}

// hostExportValid reports whether the host exports the Service.
func (s *state) hostExportValid() bool {
	ok, _, _ := s.validity()
	return s.export != nil && ok
}

// exports are the valid exports of the name: the host's and one per
// member that relays its own.
func (s *state) exports(log logrus.FieldLogger) []mcs.Export {
	var out []mcs.Export
	if s.hostExportValid() {
		out = append(out, mcs.ExportOf(wellknown.HostClusterID, s.export, s.service))
	}
	return append(out, s.relayedExports(log)...)
}

// relayedExports are the members' exports, read from their relayed slices
// (every slice of a member carries the same record), sorted by cluster. A
// record that cannot be read is left out until flotilla-node rewrites it.
func (s *state) relayedExports(log logrus.FieldLogger) []mcs.Export {
	relayed := slices.Clone(s.relayed)
	slices.SortFunc(relayed, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	byCluster := map[string]mcs.Export{}
	for _, sl := range relayed {
		cluster := sl.Labels[mcsv1beta1.LabelSourceCluster]
		if _, seen := byCluster[cluster]; seen {
			continue
		}
		l := log.WithField("endpointslice", sl.Namespace+"/"+sl.Name)
		// The host's export is "host": a member of that name cannot speak for it.
		if cluster == "" || cluster == wellknown.HostClusterID {
			l.WithField("cluster", cluster).Warn("ignoring a relayed export without a member cluster")
			continue
		}
		e, err := mcs.DecodeExport(sl.Annotations[wellknown.ExportAnnotation])
		if err != nil {
			l.WithError(err).Warn("ignoring a relayed export whose record cannot be read")
			continue
		}
		// The slice's label, not the record, names the cluster.
		e.Cluster = cluster
		byCluster[cluster] = e
	}
	out := make([]mcs.Export, 0, len(byCluster))
	for _, c := range slices.Sorted(maps.Keys(byCluster)) {
		out = append(out, byCluster[c])
	}
	return out
}

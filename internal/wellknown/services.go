package wellknown

// Names of the Multi-Cluster Services API as flotilla brokers it. The API's
// own names (multicluster.kubernetes.io/service-name, .../source-cluster) come
// from sigs.k8s.io/mcs-api; these are flotilla's.
const (
	// GlobalAnnotation, "true" on a host Service, mirrors the Service into
	// every member and gives each mirror the ready endpoints of every
	// cluster, for fleets whose pod networks are routed between clusters.
	GlobalAnnotation = Prefix + "global"

	// BrokerManagedBy is the discovery/v1 LabelManagedBy value of the host
	// slices the broker derives, per cluster, from the host's own slices of
	// forwarded pods.
	BrokerManagedBy = "broker.flotilla.io"
	// RelayManagedBy is the discovery/v1 LabelManagedBy value of the host
	// slices a flotilla-node relays from a member's own export, and of every
	// slice flotilla-node writes into a member.
	RelayManagedBy = "flotilla-node.flotilla.io"

	// ExportAnnotation, on a relayed host slice, describes the member's
	// export it comes from (cluster, creation time, the Service's type,
	// ports and session affinity) in JSON, for conflict resolution.
	ExportAnnotation = Prefix + "export"
	// ImportConflictsAnnotation, on a host ServiceImport, maps each
	// cluster whose export lost a conflict to the condition its
	// ServiceExport gets, in JSON; flotilla-node copies it onto the
	// member's export.
	ImportConflictsAnnotation = Prefix + "conflicts"
	// MultiClusterServicesAnnotation, on a virtual node, says whether its
	// member serves the ServiceImport API: the served version, or why not.
	MultiClusterServicesAnnotation = Prefix + "multicluster-services"

	// ExportedFromAnnotation, on a host namespace flotilla created because
	// a member exported a Service from a namespace of that name, names
	// the member's virtual node.
	ExportedFromAnnotation = Prefix + "exported-from"

	// HostClusterID names the host's own export in conditions, events and
	// ServiceImport status: the host is one of the exporting clusters.
	HostClusterID = "host"
)

// Event reasons and condition reasons of the Multi-Cluster Services API
// that are flotilla's own (the API's live in sigs.k8s.io/mcs-api).
const (
	// ReasonNamespaceNotSame: a cluster maps the export's namespace to
	// another name, which breaks the API's namespace sameness.
	ReasonNamespaceNotSame = "NamespaceNotSame"
	// ReasonImportUnavailable: a member does not serve the ServiceImport
	// API.
	ReasonImportUnavailable = "ImportUnavailable"
	// EventServiceExported: an export was accepted and imported.
	EventServiceExported = "ServiceExported"
	// EventServiceExportInvalid: an export names no Service, or one that
	// cannot be exported.
	EventServiceExportInvalid = "ServiceExportInvalid"
	// EventServiceExportConflict: an export conflicts with an older one.
	EventServiceExportConflict = "ServiceExportConflict"
)

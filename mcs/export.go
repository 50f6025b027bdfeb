package mcs

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Export is one cluster's export of a Service: what the KEP's conflict
// resolution compares, and when it was made.
type Export struct {
	// Cluster is the exporting cluster: a virtual node's name, or
	// wellknown.HostClusterID for an export in the host.
	Cluster string `json:"cluster"`
	// Created is the ServiceExport's creation time; the oldest export
	// wins a conflict.
	Created metav1.Time `json:"created"`
	// Type is Headless for a headless Service, ClusterSetIP otherwise.
	Type mcsv1beta1.ServiceImportType `json:"type"`
	// Ports are the Service's ports, as a ServiceImport carries them.
	Ports []mcsv1beta1.ServicePort `json:"ports,omitempty"`
	// SessionAffinity and SessionAffinityConfig are the Service's.
	SessionAffinity       corev1.ServiceAffinity        `json:"sessionAffinity,omitempty"`
	SessionAffinityConfig *corev1.SessionAffinityConfig `json:"sessionAffinityConfig,omitempty"`
}

// Exportable reports why svc cannot be exported, or nil: an ExternalName
// Service has no endpoints to share.
func Exportable(svc *corev1.Service) error {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return fmt.Errorf("service %s/%s is of type ExternalName, which has no endpoints to export", svc.Namespace, svc.Name)
	}
	return nil
}

// ExportOf is cluster's export of svc, made at created.
func ExportOf(cluster string, created metav1.Time, svc *corev1.Service) Export {
	e := Export{
		Cluster: cluster, Created: created, Type: mcsv1beta1.ClusterSetIP,
		SessionAffinity: svc.Spec.SessionAffinity,
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		e.Type = mcsv1beta1.Headless
	}
	if e.SessionAffinity == "" {
		e.SessionAffinity = corev1.ServiceAffinityNone
	}
	if svc.Spec.SessionAffinityConfig != nil && e.SessionAffinity != corev1.ServiceAffinityNone {
		e.SessionAffinityConfig = svc.Spec.SessionAffinityConfig.DeepCopy()
	}
	for _, p := range svc.Spec.Ports {
		e.Ports = append(e.Ports, mcsv1beta1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
	}
	slices.SortFunc(e.Ports, comparePorts)
	return e
}

// Encode is the export as the wellknown.ExportAnnotation carries it.
func (e Export) Encode() string {
	b, err := json.Marshal(e)
	if err != nil { // a struct of plain fields always marshals
		panic(err)
	}
	return string(b)
}

// DecodeExport reads an export from its annotation.
func DecodeExport(s string) (Export, error) {
	var e Export
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return Export{}, fmt.Errorf("read export record: %w", err)
	}
	if e.Cluster == "" || e.Type == "" {
		return Export{}, fmt.Errorf("read export record: cluster and type are required")
	}
	return e, nil
}

package servicebroker

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
)

// The broker's test objects live in namespace shop, as Service web's.
const testNamespace = "shop"

// Creation times of exports: t0 is the oldest.
var (
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

// ServiceWrapper builds a host Service.
type ServiceWrapper struct{ svc corev1.Service }

// makeService starts a ClusterIP Service name in testNamespace.
func makeService(name string) *ServiceWrapper {
	return &ServiceWrapper{svc: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("svc-" + name)},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", SessionAffinity: corev1.ServiceAffinityNone},
	}}
}

// Obj returns the Service built.
func (w *ServiceWrapper) Obj() *corev1.Service { return &w.svc }

// Port adds a port.
func (w *ServiceWrapper) Port(name string, protocol corev1.Protocol, port int32) *ServiceWrapper {
	w.svc.Spec.Ports = append(w.svc.Spec.Ports, corev1.ServicePort{Name: name, Protocol: protocol, Port: port})
	return w
}

// Headless makes the Service headless.
func (w *ServiceWrapper) Headless() *ServiceWrapper {
	w.svc.Spec.ClusterIP = corev1.ClusterIPNone
	return w
}

// ExternalName makes the Service an alias of host.
func (w *ServiceWrapper) ExternalName(host string) *ServiceWrapper {
	w.svc.Spec.Type, w.svc.Spec.ClusterIP, w.svc.Spec.ExternalName = corev1.ServiceTypeExternalName, "", host
	return w
}

// Global marks the Service global (wellknown.GlobalAnnotation).
func (w *ServiceWrapper) Global() *ServiceWrapper {
	w.svc.Annotations = map[string]string{wellknown.GlobalAnnotation: "true"}
	return w
}

// SliceWrapper builds an EndpointSlice.
type SliceWrapper struct{ sl discoveryv1.EndpointSlice }

// makeNativeSlice starts a slice name of Service service as the host's
// EndpointSlice controller keeps it.
func makeNativeSlice(name, service string) *SliceWrapper {
	return &SliceWrapper{sl: discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: endpointSliceControllerName,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}}
}

// makeRelayedSlice starts a slice name that flotilla-node relays for
// cluster's own export e of Service service.
func makeRelayedSlice(name, service, cluster string, e mcs.Export) *SliceWrapper {
	labels := mcs.SliceLabels(service, cluster, wellknown.RelayManagedBy)
	labels[wellknown.ManagedByLabel] = wellknown.ManagedByValue
	labels[wellknown.ClusterLabel] = cluster
	return &SliceWrapper{sl: discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: labels,
			Annotations: map[string]string{wellknown.ExportAnnotation: e.Encode()}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}}
}

// Obj returns the slice built.
func (w *SliceWrapper) Obj() *discoveryv1.EndpointSlice { return &w.sl }

// Port adds a port.
func (w *SliceWrapper) Port(name string, port int32) *SliceWrapper {
	w.sl.Ports = append(w.sl.Ports, discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)})
	return w
}

// Endpoint adds an endpoint at ip on node ("" for none).
func (w *SliceWrapper) Endpoint(ip, node string, ready bool) *SliceWrapper {
	w.sl.Endpoints = append(w.sl.Endpoints, endpoint(ip, node, ready))
	return w
}

// endpoint is a pod's endpoint at ip on node, as the EndpointSlice
// controller writes it.
func endpoint(ip, node string, ready bool) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: testNamespace, Name: "pod-" + ip},
		Zone:       ptr.To("zone-a"),
	}
	if node != "" {
		e.NodeName = ptr.To(node)
	}
	return e
}

// ExportWrapper builds a host ServiceExport.
type ExportWrapper struct{ e mcsv1beta1.ServiceExport }

// makeExport starts the export of Service name, made at t0.
func makeExport(name string) *ExportWrapper {
	return &ExportWrapper{e: mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: testNamespace, Generation: 1, CreationTimestamp: metav1.NewTime(t0),
	}}}
}

// Obj returns the export built.
func (w *ExportWrapper) Obj() *mcsv1beta1.ServiceExport { return &w.e }

// Created sets when the export was made.
func (w *ExportWrapper) Created(t time.Time) *ExportWrapper {
	w.e.CreationTimestamp = metav1.NewTime(t)
	return w
}

// memberExport is cluster's own export of a ClusterSetIP Service with
// ports, made at created.
func memberExport(cluster string, created time.Time, ports ...mcsv1beta1.ServicePort) mcs.Export {
	return mcs.Export{Cluster: cluster, Created: metav1.NewTime(created), Type: mcsv1beta1.ClusterSetIP,
		SessionAffinity: corev1.ServiceAffinityNone, Ports: ports}
}

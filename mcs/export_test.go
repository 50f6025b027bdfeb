package mcs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestExportOf: a Service's export carries what conflict resolution
// compares, ports sorted, session affinity defaulted to None and its config
// dropped when affinity is None.
func TestExportOf(t *testing.T) {
	config := &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	for name, tc := range map[string]struct {
		spec corev1.ServiceSpec
		want Export
	}{
		"ClusterIP": {
			spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{
				{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intOrString(8443)},
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, AppProtocol: ptr.To("http")},
			}},
			want: Export{Cluster: "beijing", Created: t0, Type: mcsv1beta1.ClusterSetIP, SessionAffinity: corev1.ServiceAffinityNone,
				Ports: []mcsv1beta1.ServicePort{
					{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, AppProtocol: ptr.To("http")},
					{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443},
				}},
		},
		"headless": {
			spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone},
			want: Export{Cluster: "beijing", Created: t0, Type: mcsv1beta1.Headless, SessionAffinity: corev1.ServiceAffinityNone},
		},
		"ClientIP affinity keeps its config": {
			spec: corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP, SessionAffinityConfig: config},
			want: Export{Cluster: "beijing", Created: t0, Type: mcsv1beta1.ClusterSetIP, SessionAffinity: corev1.ServiceAffinityClientIP, SessionAffinityConfig: config},
		},
		"no affinity drops a config": {
			spec: corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityNone, SessionAffinityConfig: config},
			want: Export{Cluster: "beijing", Created: t0, Type: mcsv1beta1.ClusterSetIP, SessionAffinity: corev1.ServiceAffinityNone},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := ExportOf("beijing", &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: t0}}, &corev1.Service{Spec: tc.spec})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ExportOf (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExportable: only ExternalName Services cannot be exported.
func TestExportable(t *testing.T) {
	for typ, ok := range map[corev1.ServiceType]bool{
		corev1.ServiceTypeClusterIP: true, corev1.ServiceTypeNodePort: true,
		corev1.ServiceTypeLoadBalancer: true, corev1.ServiceTypeExternalName: false,
	} {
		err := Exportable(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.ServiceSpec{Type: typ}})
		if (err == nil) != ok {
			t.Errorf("Exportable(%s) = %v, want exportable %v", typ, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "shop/web") {
			t.Errorf("Exportable(%s) = %q, want the Service named", typ, err)
		}
	}
}

// TestEncodeDecodeExport: an export survives its annotation, and a record
// that is not one is refused.
func TestEncodeDecodeExport(t *testing.T) {
	in := clientIP(headless(export("beijing", t1, port("http", corev1.ProtocolTCP, 80), port("dns", corev1.ProtocolUDP, 53))), 60)
	out, err := DecodeExport(in.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
	for name, record := range map[string]string{
		"empty":      "",
		"not JSON":   "beijing",
		"no cluster": `{"type":"ClusterSetIP"}`,
		"no type":    `{"cluster":"beijing"}`,
		"wrong type": `{"cluster":7,"type":"ClusterSetIP"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if e, err := DecodeExport(record); err == nil {
				t.Errorf("DecodeExport(%q) = %+v, want an error", record, e)
			}
		})
	}
}

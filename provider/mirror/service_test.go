package mirror

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/translate"
)

func TestMemberService(t *testing.T) {
	host := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-service", Namespace: "edge", UID: "u", ResourceVersion: "9"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Selector: map[string]string{"app": "nginx"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080, Protocol: corev1.ProtocolTCP}},
		},
	}
	t0 := translate.Target{Cluster: "ke-beijing-cluster", Namespace: "edge-ke-beijing-cluster", Installation: "i"}
	m := MemberService(host, t0)
	if m.Namespace != "edge-ke-beijing-cluster" || m.Name != "nginx-service" || m.UID != "" || m.ResourceVersion != "" {
		t.Errorf("metadata = %+v", m.ObjectMeta)
	}
	if m.Spec.ClusterIP != "" || m.Spec.ClusterIPs != nil || m.Spec.Ports[0].NodePort != 0 {
		t.Errorf("allocated fields kept: %+v", m.Spec)
	}
	if m.Spec.Selector["app"] != "nginx" || m.Labels[wellknown.ClusterLabel] != "ke-beijing-cluster" || m.Annotations[wellknown.HostNameAnnotation] != "nginx-service" {
		t.Errorf("selector/identity = %v %v %v", m.Spec.Selector, m.Labels, m.Annotations)
	}
	host.Spec.ClusterIP = corev1.ClusterIPNone
	if MemberService(host, t0).Spec.ClusterIP != corev1.ClusterIPNone {
		t.Error("headless Service not kept headless")
	}

	// The member allocated a cluster IP and node port; an unchanged host
	// Service must not cause an update, a changed port must.
	cur := MemberService(host, t0)
	cur.Spec.ClusterIP = "10.97.0.5"
	cur.Spec.Ports[0].NodePort = 31000
	if applyService(cur.DeepCopy(), MemberService(host, t0)) {
		t.Error("no change reported as a change")
	}
	host.Spec.Ports[0].Port = 8081
	if !applyService(cur, MemberService(host, t0)) || cur.Spec.Ports[0].Port != 8081 || cur.Spec.Ports[0].NodePort != 31000 || cur.Spec.ClusterIP != "10.97.0.5" {
		t.Errorf("update lost member allocations or the change: %+v", cur.Spec)
	}
}

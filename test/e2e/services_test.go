package e2e

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestServicesFollowWorkloads mirrors a host Service into every member that
// runs pods it selects, where the member gives it its own cluster IP and
// endpoints of the local pods, and removes it with the last such pod. A
// Service selecting nothing that runs there is never mirrored.
func TestServicesFollowWorkloads(t *testing.T) {
	ns := namespace(t)
	hc := hostClient()
	if _, err := hc.AppsV1().Deployments(ns).Create(t.Context(), deployment(ns, "svc-web", 6), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, app := range map[string]string{"web-service": "svc-web", "idle-service": "nothing-runs-this"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}}
		if _, err := hc.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, "each member serves web-service from its own pods", func(ctx context.Context) (bool, string, error) {
		for _, name := range members {
			mc := memberClient(name)
			svc, err := mc.CoreV1().Services(ns).Get(ctx, "web-service", metav1.GetOptions{})
			if err != nil {
				return false, name + ": " + err.Error(), nil
			}
			_, cidr, _ := net.ParseCIDR(env.World.Member(name).ServiceCIDR)
			if !cidr.Contains(net.ParseIP(svc.Spec.ClusterIP)) {
				return false, fmt.Sprintf("%s: cluster IP %s not from %s", name, svc.Spec.ClusterIP, cidr), nil
			}
			pods, err := mc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=svc-web"})
			if err != nil {
				return false, err.Error(), nil
			}
			slices, err := mc.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web-service"})
			if err != nil {
				return false, err.Error(), nil
			}
			ready := 0
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready != nil && *e.Conditions.Ready {
						ready++
					}
				}
			}
			if len(pods.Items) == 0 || ready != len(pods.Items) {
				return false, fmt.Sprintf("%s: %d pods, %d ready endpoints", name, len(pods.Items), ready), nil
			}
			if _, err := mc.CoreV1().Services(ns).Get(ctx, "idle-service", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, "", fmt.Errorf("%s: idle-service mirrored though nothing it selects runs there (%v)", name, err)
			}
		}
		return true, "", nil
	})

	if _, err := hc.AppsV1().Deployments(ns).Patch(t.Context(), "svc-web", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "web-service removed from the members with its last pod", func(ctx context.Context) (bool, string, error) {
		for _, name := range members {
			_, err := memberClient(name).CoreV1().Services(ns).Get(ctx, "web-service", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("%s: %v", name, err), nil
			}
		}
		return true, "", nil
	})
}

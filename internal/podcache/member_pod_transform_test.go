// This file tests what the member cache keeps of nodes.

package podcache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The virtual node and installation the tests' pods are forwarded by.
const (
	testNode         = "vn"
	testInstallation = "inst"
)

// TestMemberNodesKeepWhatTheVirtualNodeReads: a member node is cached with
// what the virtual node is built from, and the same virtual node comes of
// it; a kubelet's image list, volumes, addresses, system info and
// annotations are dropped. Before, member nodes were cached whole.
func TestMemberNodesKeepWhatTheVirtualNodeReads(t *testing.T) {
	transform := MemberPodTransform(testInstallation)
	node := kubeletNode(7)
	node.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	want := node.DeepCopy()
	out, err := transform(node)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Node)
	if got.Name != want.Name || got.UID != want.UID || got.ResourceVersion != want.ResourceVersion {
		t.Errorf("identity: %s %s %s", got.Name, got.UID, got.ResourceVersion)
	}
	for what, d := range map[string]string{
		"labels":      cmp.Diff(want.Labels, got.Labels),
		"taints":      cmp.Diff(want.Spec.Taints, got.Spec.Taints),
		"allocatable": cmp.Diff(want.Status.Allocatable, got.Status.Allocatable),
		"capacity":    cmp.Diff(want.Status.Capacity, got.Status.Capacity),
		"conditions":  cmp.Diff(want.Status.Conditions, got.Status.Conditions),
	} {
		if d != "" {
			t.Errorf("%s (-node +cached):\n%s", what, d)
		}
	}
	if got.Annotations != nil || got.ManagedFields != nil || got.Status.Images != nil || got.Status.VolumesAttached != nil ||
		got.Status.Addresses != nil || got.Status.NodeInfo != (corev1.NodeSystemInfo{}) || got.Spec.PodCIDRs != nil {
		t.Errorf("kept what nothing reads: %+v", got)
	}
	cordoned := kubeletNode(8)
	cordoned.Spec.Unschedulable = true
	if c, _ := transform(cordoned); !c.(*corev1.Node).Spec.Unschedulable {
		t.Error("a cordoned node is cached as schedulable")
	}
}

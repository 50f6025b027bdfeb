// This file tests what the member cache keeps of nodes and of the
// member's own pods.

package podcache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache/podcachetest"
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
	node.Status.DeclaredFeatures = []string{"RestartAllContainersOnContainerExits"} // as a kubelet of 1.36+
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
		"labels":            cmp.Diff(want.Labels, got.Labels),
		"taints":            cmp.Diff(want.Spec.Taints, got.Spec.Taints),
		"allocatable":       cmp.Diff(want.Status.Allocatable, got.Status.Allocatable),
		"capacity":          cmp.Diff(want.Status.Capacity, got.Status.Capacity),
		"conditions":        cmp.Diff(want.Status.Conditions, got.Status.Conditions),
		"declared features": cmp.Diff(want.Status.DeclaredFeatures, got.Status.DeclaredFeatures),
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

// TestMemberOwnPodsKeepTheirPriority: a pod the member runs for itself
// keeps, besides what it requests, its priority, which the fit model
// counts for the member's scheduler's preemption; the pods of one
// workload on one node still share one spec.
func TestMemberOwnPodsKeepTheirPriority(t *testing.T) {
	transform := MemberPodTransform(testInstallation)
	var specs []*corev1.PodSpec
	for i := range 2 {
		p := podcachetest.NativePod(i)
		p.Spec.NodeName = "n1"
		p.Spec.Priority = ptr.To[int32](10)
		requests := func(p *corev1.Pod) corev1.ResourceList {
			return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		}
		want := requests(p)
		out, err := transform(p)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*memberpod.Pod)
		if ptr.Deref(got.Spec.Priority, 0) != 10 {
			t.Errorf("cached priority %v, want 10", got.Spec.Priority)
		}
		if d := cmp.Diff(want, requests(&corev1.Pod{Spec: *got.Spec})); d != "" {
			t.Errorf("requests (-pod +cached):\n%s", d)
		}
		specs = append(specs, got.Spec)
	}
	if specs[0] != specs[1] {
		t.Error("two pods of a workload on one node keep two specs")
	}
}

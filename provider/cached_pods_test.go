// This file tests that the pod caches keep what forwarding reads: a pod
// translated, its dependencies, its status read back, from the cached
// pods as from the whole ones.

package provider

import (
	"maps"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podcache/podcachetest"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/translate"
)

// sameMap reports whether a and b are one map, not two equal ones.
func sameMap(a, b map[string]string) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// admittedMemberPod is what the member holds for host once its admission
// and scheduler have had it: a token volume of its own, a node.
func admittedMemberPod(host *corev1.Pod, t translate.Target) *corev1.Pod {
	m := translate.ToMember(host, t)
	m.UID, m.ResourceVersion = "m-1", "12"
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "flotilla-node", Operation: metav1.ManagedFieldsOperationUpdate}}
	m.Spec.Volumes = append(m.Spec.Volumes, podcachetest.AdmittedPod().Spec.Volumes[0])
	m.Spec.Containers[0].VolumeMounts = append(m.Spec.Containers[0].VolumeMounts, podcachetest.AdmittedPod().Spec.Containers[0].VolumeMounts[0])
	m.Spec.NodeName = "node-7"
	m.Spec.SchedulerName = corev1.DefaultSchedulerName
	m.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.5", QOSClass: corev1.PodQOSBurstable,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.k8s.io/pause:3.10"}}}
	return m
}

// A forwarded member pod is cached with much less, and nothing flotilla
// reads of it changes: its dependencies, its requests on its node, what
// translate.HostView shows of it, its status and identity.
func TestMemberPodTransform(t *testing.T) {
	target := translate.Target{Cluster: "beijing", Namespace: "app", Installation: testInstallation}
	host := podcachetest.RichHostPod()
	member := admittedMemberPod(host, target)
	transform := podcache.MemberPodTransform(testInstallation)
	cached := podcachetest.TransformedMember(t, transform, member)

	if cached.ManagedFields != nil {
		t.Error("managed fields kept")
	}
	// A member pod's dependencies are read for the index alone.
	if d := cmp.Diff(usedKeys(member.Namespace, &member.Spec), usedKeys(cached.Namespace, cached.Spec)); d != "" {
		t.Errorf("dependencies (-pod +cached):\n%s", d)
	}
	opts := resourcehelper.PodResourcesOptions{}
	if d := cmp.Diff(resourcehelper.PodRequests(member, opts), resourcehelper.PodRequests(cached.AsPod(), opts)); d != "" {
		t.Errorf("requests (-pod +cached):\n%s", d)
	}
	if d := cmp.Diff(translate.HostView(host, memberpod.New(member), target), translate.HostView(host, cached, target)); d != "" {
		t.Errorf("translate.HostView (-pod +cached):\n%s", d)
	}
	// The host pod's name is left out when it is the member pod's own
	// (dropOwnHostName), and read back by podcache.HostKeyOf.
	if ns, name := podcache.HostKeyOf(cached); ns != host.Namespace || name != host.Name {
		t.Errorf("host pod of the cached member pod: %s/%s, want %s/%s", ns, name, host.Namespace, host.Name)
	}
	// The host UID is a field of its own, not a label.
	if cached.HostUID != host.UID {
		t.Errorf("host UID of the cached member pod: %q, want %q", cached.HostUID, host.UID)
	}
	wantMeta := member.ObjectMeta.DeepCopy()
	delete(wantMeta.Annotations, wellknown.HostNameAnnotation)
	delete(wantMeta.Labels, wellknown.HostUIDLabel)
	if d := cmp.Diff(*wantMeta, cached.ObjectMeta, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "ManagedFields" }, cmp.Ignore())); d != "" {
		t.Errorf("metadata (-pod +cached):\n%s", d)
	}
	// An adopted member pod, named otherwise than its host pod, keeps
	// the name.
	adopted := member.DeepCopy()
	adopted.Name = "legacy-web-0"
	if ns, name := podcache.HostKeyOf(podcachetest.TransformedMember(t, transform, adopted)); ns != host.Namespace || name != host.Name {
		t.Errorf("host pod of an adopted member pod: %s/%s, want %s/%s", ns, name, host.Namespace, host.Name)
	}
	if d := cmp.Diff(member.Status, cached.Status); d != "" {
		t.Errorf("status (-pod +cached):\n%s", d)
	}
	if cached.Spec.NodeName != "node-7" || cached.Spec.Containers[0].Name != "app" || cached.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("node, container names or restart policy lost: %+v", cached.Spec)
	}
	pm := member.DeepCopy()
	pm.ManagedFields = nil
	if before, after := pm.Size(), cached.AsPod().Size(); after >= before {
		t.Errorf("cached member pod is %d bytes of %d", after, before)
	}
	// A Deployment's plain pod, mostly metadata and status, loses a
	// quarter: its token volume, mounts and defaults.
	plain := admittedMemberPod(podcachetest.AdmittedPod(), target)
	plain.ManagedFields = nil
	if before, after := plain.Size(), podcachetest.TransformedMember(t, transform, plain).AsPod().Size(); after*4 > before*3 {
		t.Errorf("cached plain member pod is %d bytes of %d: no more than three quarters should be kept", after, before)
	} else {
		t.Logf("plain member pod %d bytes, cached %d", before, after)
	}
	if d := cmp.Diff(cached, podcachetest.TransformedAgain(t, transform, cached)); d != "" {
		t.Errorf("not idempotent (-once +twice):\n%s", d)
	}

	// Pods flotilla did not forward, the member's own and another
	// installation's, keep what the fit model counts and what tells
	// whose they are; see TestForeignMemberPodsKeepWhatIsCounted.
	own := podcachetest.AdmittedPod()
	own.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	kept := podcachetest.TransformedMember(t, transform, own)
	if d := cmp.Diff(resourcehelper.PodRequests(own, opts), resourcehelper.PodRequests(kept.AsPod(), opts)); d != "" {
		t.Errorf("a member's own pod's requests (-pod +cached):\n%s", d)
	}
	other := podcachetest.TransformedMember(t, podcache.MemberPodTransform("another-installation"), member)
	otherLabels := maps.Clone(pm.Labels)
	delete(otherLabels, wellknown.HostUIDLabel)
	if d := cmp.Diff(otherLabels, other.Labels); d != "" || other.HostUID != host.UID {
		t.Errorf("another installation's pod's labels (-pod +cached), host UID %q:\n%s", other.HostUID, d)
	}
	if other.Annotations != nil || other.Spec.Volumes != nil {
		t.Errorf("another installation's pod kept its annotations %v or volumes %v", other.Annotations, other.Spec.Volumes)
	}

	// A Service or claim of the installation's only loses its managed
	// fields; another owner's keeps its identity alone. Nodes: see
	// TestMemberNodesKeepWhatTheVirtualNodeReads.
	mine := target.Owner().Stamp(map[string]string{"app": "web"})
	for _, owner := range []map[string]string{mine, {"app": "web"}, {wellknown.ClusterLabel: "beijing", wellknown.InstallationLabel: "another-installation"}} {
		meta := metav1.ObjectMeta{Name: "web", Namespace: "app", UID: "u-1", ResourceVersion: "7", Labels: owner,
			Annotations: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
		for _, obj := range []any{
			&corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
			&corev1.PersistentVolumeClaim{ObjectMeta: meta, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}},
		} {
			out, err := transform(obj)
			if err != nil {
				t.Fatal(err)
			}
			var kept metav1.ObjectMeta
			var whole bool
			switch o := out.(type) {
			case *corev1.Service:
				kept, whole = o.ObjectMeta, len(o.Spec.Ports) == 1
			case *corev1.PersistentVolumeClaim:
				kept, whole = o.ObjectMeta, o.Spec.VolumeName == "pv-1"
			}
			if kept.ManagedFields != nil || kept.Name != "web" || kept.Namespace != "app" || kept.UID != "u-1" || !maps.Equal(kept.Labels, owner) {
				t.Errorf("%T of %v: metadata %+v", out, owner, kept)
			}
			if ours := maps.Equal(owner, mine); whole != ours || (kept.Annotations != nil) != ours {
				t.Errorf("%T of %v (ours %v): spec kept %v, annotations %v", out, owner, ours, whole, kept.Annotations)
			}
		}
	}
}

// A host pod is cached whole but for what translate.ToMember drops: the parts of the
// host's token volume other than the token, and its mounts.
func TestHostPodTransform(t *testing.T) {
	target := translate.Target{Cluster: "beijing", Namespace: "app", Installation: testInstallation}
	host := podcachetest.RichHostPod()
	cached := podcachetest.Transformed(t, podcache.HostPodTransform, host)

	if cached.ManagedFields != nil {
		t.Error("managed fields kept")
	}
	if d := cmp.Diff(translate.ToMember(host, target), translate.ToMember(cached, target)); d != "" {
		t.Errorf("forwarded pod (-pod +cached):\n%s", d)
	}
	if d := cmp.Diff(podDependencies(&host.Spec, nil), podDependencies(&cached.Spec, nil), cmp.AllowUnexported(dependency{}, objectRef{}, usage{})); d != "" {
		t.Errorf("dependencies (-pod +cached):\n%s", d)
	}
	if !podcachetest.PodsEffectivelyEqual(podcache.VirtualKubeletView(podcachetest.Transformed(t, podcache.StripManagedFields, host)), podcache.VirtualKubeletView(cached)) {
		t.Error("virtual-kubelet's view changed")
	}
	if d := cmp.Diff(host.Status, cached.Status); d != "" {
		t.Errorf("status (-pod +cached):\n%s", d)
	}
	v := cached.Spec.Volumes[0]
	if v.Name != "kube-api-access-abcde" || len(v.Projected.Sources) != 1 || v.Projected.Sources[0].ServiceAccountToken == nil {
		t.Errorf("token volume = %+v", v)
	}
	for _, m := range cached.Spec.Containers[0].VolumeMounts {
		if m.Name == v.Name {
			t.Error("token volume mount kept")
		}
	}
	if d := cmp.Diff(cached, podcachetest.Transformed(t, podcache.HostPodTransform, cached)); d != "" {
		t.Errorf("not idempotent (-once +twice):\n%s", d)
	}
}

// TestResourcesInterned: pods cached with equal resource lists share one
// map, whichever cache holds them and however the quantities were
// written; a pod asking for other resources has its own; what a reader
// sees is unchanged.
func TestResourcesInterned(t *testing.T) {
	withRequests := func(cpu, memory string) *corev1.Pod {
		p := podcachetest.RichHostPod()
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		return p
	}
	a := podcachetest.Transformed(t, podcache.HostPodTransform, withRequests("100m", "128Mi"))
	b := podcachetest.Transformed(t, podcache.HostPodTransform, withRequests("0.1", "128Mi")) // the same amount, written otherwise
	member := podcachetest.TransformedMember(t, podcache.MemberPodTransform(testInstallation), translate.ToMember(withRequests("100m", "128Mi"),
		translate.Target{Cluster: "beijing", Namespace: "app", Installation: testInstallation})).AsPod()
	other := podcachetest.Transformed(t, podcache.HostPodTransform, withRequests("200m", "128Mi"))
	req := func(p *corev1.Pod) corev1.ResourceList { return p.Spec.Containers[0].Resources.Requests }
	if !sameList(req(a), req(b)) || !sameList(req(a), req(member)) {
		t.Error("pods asking for the same hold separate lists")
	}
	if sameList(req(a), req(other)) {
		t.Error("a pod asking for more shares the list of one asking for less")
	}
	if !sameList(a.Spec.Overhead, other.Spec.Overhead) {
		t.Error("equal overheads are not shared")
	}
	want := withRequests("100m", "128Mi")
	if got := resourcehelper.PodRequests(a, resourcehelper.PodResourcesOptions{}); !quantitiesEqual(got, resourcehelper.PodRequests(want, resourcehelper.PodResourcesOptions{})) {
		t.Errorf("requests read from the cache: %v", got)
	}
}

func sameList(a, b corev1.ResourceList) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func quantitiesEqual(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if q.Cmp(b[name]) != 0 {
			return false
		}
	}
	return true
}

// TestMemberPodVersionsShare: a status update of a forwarded member pod
// shares the cached version's trimmed spec and unchanged metadata, and
// reads as the transform alone makes it; the version cached of a pod
// adopted since (not trimmed) is not taken for a trimmed one.
func TestMemberPodVersionsShare(t *testing.T) {
	target := translate.Target{Cluster: "beijing", Namespace: "app", Installation: testInstallation}
	member := admittedMemberPod(podcachetest.RichHostPod(), target)
	member.Generation = 1
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	transform := podcache.MemberPodsTransform(testInstallation, func() cache.Store { return store })
	first := podcachetest.TransformedMember(t, transform, member)
	if err := store.Add(first); err != nil {
		t.Fatal(err)
	}
	next := member.DeepCopy()
	next.ResourceVersion, next.Status.Phase = "13", corev1.PodSucceeded
	got := podcachetest.TransformedMember(t, transform, next)
	if d := cmp.Diff(podcachetest.TransformedMember(t, podcache.MemberPodTransform(testInstallation), next), got); d != "" {
		t.Errorf("a status update reads differently (-transform alone +shared):\n%s", d)
	}
	if got.Spec != first.Spec || !sameMap(got.Labels, first.Labels) || !sameMap(got.Annotations, first.Annotations) {
		t.Error("a status update holds its own copy of the unchanged spec or metadata")
	}

	// The cached version is the member's own pod, untrimmed; the new one
	// is ours since an adoption.
	own := member.DeepCopy()
	delete(own.Labels, wellknown.InstallationLabel)
	if err := store.Update(podcachetest.TransformedMember(t, transform, own)); err != nil {
		t.Fatal(err)
	}
	adopted := podcachetest.TransformedMember(t, transform, member)
	if d := cmp.Diff(podcachetest.TransformedMember(t, podcache.MemberPodTransform(testInstallation), member), adopted); d != "" {
		t.Errorf("an adopted pod is cached otherwise than the transform alone makes it (-alone +shared):\n%s", d)
	}
}

// TestForeignMemberPodsKeepWhatIsCounted: a member pod flotilla did not
// forward is cached with what the virtual node counts of it (its node,
// phase and requests, sidecars and overhead included) and what tells whose
// it is (name, UID, labels), nothing else; a workload's replicas share
// their labels and containers. Before, such pods were cached whole: a
// member with thousands of its own pods cost every flotilla-node their
// full size.
func TestForeignMemberPodsKeepWhatIsCounted(t *testing.T) {
	transform := podcache.MemberPodTransform(testInstallation)
	pod := podcachetest.NativePod(1)
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	pod.DeletionTimestamp = ptr.To(metav1.Now())
	want := pod.DeepCopy()
	got := podcachetest.TransformedMember(t, transform, pod)

	opts := resourcehelper.PodResourcesOptions{}
	if d := cmp.Diff(resourcehelper.PodRequests(want, opts), resourcehelper.PodRequests(got.AsPod(), opts)); d != "" {
		t.Errorf("requests (-pod +cached):\n%s", d)
	}
	if got.Name != want.Name || got.Namespace != want.Namespace || got.UID != want.UID || got.Generation != want.Generation ||
		got.ResourceVersion != want.ResourceVersion || !got.DeletionTimestamp.Equal(want.DeletionTimestamp) {
		t.Errorf("identity: got %s/%s %s gen %d rv %s deleted %v", got.Namespace, got.Name, got.UID, got.Generation, got.ResourceVersion, got.DeletionTimestamp)
	}
	if d := cmp.Diff(want.Labels, got.Labels); d != "" {
		t.Errorf("labels (-pod +cached):\n%s", d)
	}
	if got.Spec.NodeName != want.Spec.NodeName || got.Status.Phase != want.Status.Phase {
		t.Errorf("node %q phase %q, want %q %q", got.Spec.NodeName, got.Status.Phase, want.Spec.NodeName, want.Status.Phase)
	}
	if got.Annotations != nil || got.OwnerReferences != nil || got.ManagedFields != nil || got.Spec.Volumes != nil ||
		got.Status.Conditions != nil || got.Status.ContainerStatuses != nil || got.Status.PodIPs != nil {
		t.Errorf("kept what nothing reads: %+v", got)
	}
	for _, c := range append(got.Spec.InitContainers, got.Spec.Containers...) {
		if c.Env != nil || c.VolumeMounts != nil || c.LivenessProbe != nil || c.Image != "" || c.Resources.Limits != nil {
			t.Errorf("container %s kept what nothing reads: %+v", c.Name, c)
		}
	}
	if d := cmp.Diff(got, podcachetest.TransformedAgain(t, transform, got)); d != "" {
		t.Errorf("not idempotent (-once +twice):\n%s", d)
	}

	// Two replicas, decoded apart, on one node, share their labels and
	// spec.
	a, b := podcachetest.TransformedMember(t, transform, podcachetest.NativePod(2)), podcachetest.TransformedMember(t, transform, podcachetest.NativePod(5))
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two replicas' equal labels are two maps")
	}
	if a.Spec != b.Spec {
		t.Error("two replicas' equal specs are two")
	}
	// The fit model counts them as it counted the whole pods.
	whole, trimmed := fit.NewUsage(nil), fit.NewUsage(nil)
	for i := range 4 {
		whole.Set(podcachetest.NativePod(i))
		m := podcachetest.TransformedMember(t, transform, podcachetest.NativePod(i))
		trimmed.SetOf(&m.ObjectMeta, m.Spec, m.Status.Phase)
	}
	for _, node := range []string{"member-node-0", "member-node-1", "member-node-2"} {
		w, _ := whole.Of(node, "")
		g, _ := trimmed.Of(node, "")
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("usage of %s (-whole +cached):\n%s", node, d)
		}
	}
}

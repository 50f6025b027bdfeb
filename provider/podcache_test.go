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
	"flotilla.io/flotilla/internal/wellknown"
)

// richHostPod is an admitted host pod that uses every kind of reference
// flotilla follows and much that it does not read once forwarded.
func richHostPod() *corev1.Pod {
	pod := admittedPod()
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}}
	s := &pod.Spec
	s.ServiceAccountName = "robot"
	s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	s.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	s.Volumes = append(s.Volumes,
		corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Items: []corev1.KeyToPath{{Key: "crt", Path: "tls.crt"}}}}},
		corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Optional: ptr.To(true)}}},
		corev1.Volume{Name: "bundle", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
		}}}},
		corev1.Volume{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-creds"}}}},
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
	)
	c := &s.Containers[0]
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
		corev1.EnvVar{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/tls"}, corev1.VolumeMount{Name: "data", MountPath: "/data"})
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}}
	c.Command = []string{"/app", "--serve"}
	s.InitContainers = []corev1.Container{{
		Name: "proxy", Image: "proxy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		Env:       []corev1.EnvVar{{Name: "UPSTREAM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "routes"}, Key: "up"}}}},
	}}
	s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname"}}}}}
	return pod
}

// admittedMemberPod is what the member holds for host once its admission
// and scheduler have had it: a token volume of its own, a node.
func admittedMemberPod(host *corev1.Pod, t Target) *corev1.Pod {
	m := ToMember(host, t)
	m.UID, m.ResourceVersion = "m-1", "12"
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "flotilla-node", Operation: metav1.ManagedFieldsOperationUpdate}}
	m.Spec.Volumes = append(m.Spec.Volumes, admittedPod().Spec.Volumes[0])
	m.Spec.Containers[0].VolumeMounts = append(m.Spec.Containers[0].VolumeMounts, admittedPod().Spec.Containers[0].VolumeMounts[0])
	m.Spec.NodeName = "node-7"
	m.Spec.SchedulerName = corev1.DefaultSchedulerName
	m.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.5", QOSClass: corev1.PodQOSBurstable,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.k8s.io/pause:3.10"}}}
	return m
}

// transformedAs is what f makes of obj.
func transformedAs[T any](t *testing.T, f cache.TransformFunc, obj any) T {
	t.Helper()
	out, err := f(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out.(T)
}

func transformed(t *testing.T, f cache.TransformFunc, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	return transformedAs[*corev1.Pod](t, f, pod.DeepCopy())
}

// transformedMember is transformed by a member pod transform.
func transformedMember(t *testing.T, f cache.TransformFunc, pod *corev1.Pod) *memberpod.Pod {
	t.Helper()
	return transformedAs[*memberpod.Pod](t, f, pod.DeepCopy())
}

// transformedAgain is what f makes of what it made already: the same.
func transformedAgain(t *testing.T, f cache.TransformFunc, m *memberpod.Pod) *memberpod.Pod {
	t.Helper()
	return transformedAs[*memberpod.Pod](t, f, m)
}

// A forwarded member pod is cached with much less, and nothing flotilla
// reads of it changes: its dependencies, its requests on its node, what
// HostView shows of it, its status and identity.
func TestMemberPodTransform(t *testing.T) {
	target := Target{Cluster: "beijing", Namespace: "app", Installation: testInstallation}
	host := richHostPod()
	member := admittedMemberPod(host, target)
	transform := MemberPodTransform(testInstallation)
	cached := transformedMember(t, transform, member)

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
	if d := cmp.Diff(HostView(host, memberpod.New(member), target), HostView(host, cached, target)); d != "" {
		t.Errorf("HostView (-pod +cached):\n%s", d)
	}
	// The host pod's name is left out when it is the member pod's own
	// (dropOwnHostName), and read back by hostKeyOf.
	if ns, name := hostKeyOf(cached); ns != host.Namespace || name != host.Name {
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
	if ns, name := hostKeyOf(transformedMember(t, transform, adopted)); ns != host.Namespace || name != host.Name {
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
	plain := admittedMemberPod(admittedPod(), target)
	plain.ManagedFields = nil
	if before, after := plain.Size(), transformedMember(t, transform, plain).AsPod().Size(); after*4 > before*3 {
		t.Errorf("cached plain member pod is %d bytes of %d: no more than three quarters should be kept", after, before)
	} else {
		t.Logf("plain member pod %d bytes, cached %d", before, after)
	}
	if d := cmp.Diff(cached, transformedAgain(t, transform, cached)); d != "" {
		t.Errorf("not idempotent (-once +twice):\n%s", d)
	}

	// Pods flotilla did not forward, the member's own and another
	// installation's, keep what the fit model counts and what tells
	// whose they are; see TestForeignMemberPodsKeepWhatIsCounted.
	own := admittedPod()
	own.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	kept := transformedMember(t, transform, own)
	if d := cmp.Diff(resourcehelper.PodRequests(own, opts), resourcehelper.PodRequests(kept.AsPod(), opts)); d != "" {
		t.Errorf("a member's own pod's requests (-pod +cached):\n%s", d)
	}
	other := transformedMember(t, MemberPodTransform("another-installation"), member)
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

// A host pod is cached whole but for what ToMember drops: the parts of the
// host's token volume other than the token, and its mounts.
func TestHostPodTransform(t *testing.T) {
	target := Target{Cluster: "beijing", Namespace: "app", Installation: testInstallation}
	host := richHostPod()
	cached := transformed(t, HostPodTransform, host)

	if cached.ManagedFields != nil {
		t.Error("managed fields kept")
	}
	if d := cmp.Diff(ToMember(host, target), ToMember(cached, target)); d != "" {
		t.Errorf("forwarded pod (-pod +cached):\n%s", d)
	}
	if d := cmp.Diff(podDependencies(&host.Spec, nil), podDependencies(&cached.Spec, nil), cmp.AllowUnexported(dependency{}, objectRef{}, usage{})); d != "" {
		t.Errorf("dependencies (-pod +cached):\n%s", d)
	}
	if !podsEffectivelyEqual(vkView(transformed(t, StripManagedFields, host)), vkView(cached)) {
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
	if d := cmp.Diff(cached, transformed(t, HostPodTransform, cached)); d != "" {
		t.Errorf("not idempotent (-once +twice):\n%s", d)
	}
}

// TestResourcesInterned: pods cached with equal resource lists share one
// map, whichever cache holds them and however the quantities were
// written; a pod asking for other resources has its own; what a reader
// sees is unchanged.
func TestResourcesInterned(t *testing.T) {
	withRequests := func(cpu, memory string) *corev1.Pod {
		p := richHostPod()
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		return p
	}
	a := transformed(t, HostPodTransform, withRequests("100m", "128Mi"))
	b := transformed(t, HostPodTransform, withRequests("0.1", "128Mi")) // the same amount, written otherwise
	member := transformedMember(t, MemberPodTransform(testInstallation), ToMember(withRequests("100m", "128Mi"),
		Target{Cluster: "beijing", Namespace: "app", Installation: testInstallation})).AsPod()
	other := transformed(t, HostPodTransform, withRequests("200m", "128Mi"))
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
	target := Target{Cluster: "beijing", Namespace: "app", Installation: testInstallation}
	member := admittedMemberPod(richHostPod(), target)
	member.Generation = 1
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	transform := MemberPodsTransform(testInstallation, func() cache.Store { return store })
	first := transformedMember(t, transform, member)
	if err := store.Add(first); err != nil {
		t.Fatal(err)
	}
	next := member.DeepCopy()
	next.ResourceVersion, next.Status.Phase = "13", corev1.PodSucceeded
	got := transformedMember(t, transform, next)
	if d := cmp.Diff(transformedMember(t, MemberPodTransform(testInstallation), next), got); d != "" {
		t.Errorf("a status update reads differently (-transform alone +shared):\n%s", d)
	}
	if got.Spec != first.Spec || !sameMap(got.Labels, first.Labels) || !sameMap(got.Annotations, first.Annotations) {
		t.Error("a status update holds its own copy of the unchanged spec or metadata")
	}

	// The cached version is the member's own pod, untrimmed; the new one
	// is ours since an adoption.
	own := member.DeepCopy()
	delete(own.Labels, wellknown.InstallationLabel)
	if err := store.Update(transformedMember(t, transform, own)); err != nil {
		t.Fatal(err)
	}
	adopted := transformedMember(t, transform, member)
	if d := cmp.Diff(transformedMember(t, MemberPodTransform(testInstallation), member), adopted); d != "" {
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
	transform := MemberPodTransform(testInstallation)
	pod := nativePod(1)
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	pod.DeletionTimestamp = ptr.To(metav1.Now())
	want := pod.DeepCopy()
	got := transformedMember(t, transform, pod)

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
	if d := cmp.Diff(got, transformedAgain(t, transform, got)); d != "" {
		t.Errorf("not idempotent (-once +twice):\n%s", d)
	}

	// Two replicas, decoded apart, on one node, share their labels and
	// spec.
	a, b := transformedMember(t, transform, nativePod(2)), transformedMember(t, transform, nativePod(5))
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two replicas' equal labels are two maps")
	}
	if a.Spec != b.Spec {
		t.Error("two replicas' equal specs are two")
	}
	// The fit model counts them as it counted the whole pods.
	whole, trimmed := fit.NewUsage(nil), fit.NewUsage(nil)
	for i := range 4 {
		whole.Set(nativePod(i))
		m := transformedMember(t, transform, nativePod(i))
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

// This file measures what the caches hold per pod, node and event.

package podcache

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache/podcachetest"
	"flotilla.io/flotilla/internal/wellknown"
)

// cachedPods is a host pod of a Deployment as the apiserver serves it once
// it runs (defaults, token volume, default tolerations, status), and its
// member pod, each i-th of a burst that starts 50 pods a second.
func cachedPods(i int) (host, member *corev1.Pod) {
	name := fmt.Sprintf("burst-0-6d5f8b7c9-%05d", i)
	uid := types.UID(fmt.Sprintf("3f2a1b4c-5d6e-4f70-8a9b-%012d", i))
	now := metav1.NewTime(time.Date(2026, 11, 26, 9, 0, i/50, 0, time.UTC))
	host = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: "burst-0-6d5f8b7c9-", Namespace: "bench", UID: uid,
			ResourceVersion: fmt.Sprint(100000 + i), Generation: 1, CreationTimestamp: now,
			Labels: map[string]string{"app": "burst-0", "pod-template-hash": "6d5f8b7c9"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "burst-0-6d5f8b7c9",
				UID: "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "kube-api-access-" + fmt.Sprintf("%05d", i), VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To(int64(3607)), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				}, DefaultMode: ptr.To(int32(420))}}}},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("1Mi")}},
				VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access-" + fmt.Sprintf("%05d", i), ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			DeprecatedServiceAccount:      "default",
			NodeName:                      "beijing",
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations: append([]corev1.Toleration{
				{Key: wellknown.ProviderTaintKey, Operator: corev1.TolerationOpEqual, Value: wellknown.ProviderTaintValue, Effect: corev1.TaintEffectNoSchedule},
			}, podcachetest.DefaultTolerations()...),
			Priority:           ptr.To(int32(0)),
			EnableServiceLinks: ptr.To(true),
			PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: podcachetest.RunningConditions(now),
			HostIP:     "10.0.0.1", HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}},
			PodIP: fmt.Sprintf("10.1.%d.%d", i/250, i%250), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250)}},
			StartTime: &now,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Ready: true, Started: ptr.To(true), Image: "registry.k8s.io/pause:3.10", ImageID: "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
				ContainerID: fmt.Sprintf("containerd://%064d", i),
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			}},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
	member = host.DeepCopy()
	member.Namespace = "bench"
	member.UID = types.UID(fmt.Sprintf("7e6d5c4b-3a29-4180-9f8e-%012d", i))
	member.OwnerReferences = nil
	member.GenerateName = ""
	owner := wellknown.Owner{Cluster: "beijing", Installation: "host-1"}
	member.Labels = owner.Stamp(member.Labels)
	member.Labels[wellknown.HostUIDLabel] = string(host.UID)
	member.Annotations = map[string]string{wellknown.HostNamespaceAnnotation: "bench", wellknown.HostNameAnnotation: name}
	member.Spec.NodeName = fmt.Sprintf("kwok-node-%d", i%3)
	member.Spec.Tolerations = member.Spec.Tolerations[1:]
	return host, member
}

// kubeletNode is the i-th node of a member as its kubelet reports it: the
// labels of a cloud's node, the annotations of a CSI driver and a network
// plugin, 50 images (a kubelet's default limit), two attached volumes,
// addresses, system info and its conditions.
func kubeletNode(i int) *corev1.Node {
	name := fmt.Sprintf("cn-hangzhou.10.0.%d.%d", i/250, i%250)
	ip := fmt.Sprintf("10.0.%d.%d", i/250, i%250)
	now := metav1.NewTime(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))
	var images []corev1.ContainerImage
	for j := range 50 {
		images = append(images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example/team-%d/service-%d@sha256:%064x", j%7, j, j*7919), fmt.Sprintf("registry.example/team-%d/service-%d:v1.%d.%d", j%7, j, j%5, j)},
			SizeBytes: int64(20<<20 + j*1<<20),
		})
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, LastHeartbeatTime: now, LastTransitionTime: now, Reason: reason, Message: msg}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(fmt.Sprintf("6c5b4a39-2817-4f60-9e8d-%012d", i)), ResourceVersion: fmt.Sprint(300000 + i), CreationTimestamp: now,
			Labels: map[string]string{"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
				"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "ecs.g7.2xlarge", "topology.kubernetes.io/region": "cn-hangzhou",
				"topology.kubernetes.io/zone": "cn-hangzhou-h", "node-pool": "general"},
			Annotations: map[string]string{
				"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"diskplugin.csi.example.com":"i-bp1%016d","nasplugin.csi.example.com":"i-bp1%016d"}`, i, i),
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"projectcalico.org/IPv4Address":                          ip + "/24",
				"projectcalico.org/IPv4VXLANTunnelAddr":                  fmt.Sprintf("172.16.%d.%d", i/250, i%250),
				"kubeadm.alpha.kubernetes.io/cri-socket":                 "unix:///run/containerd/containerd.sock",
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("172.20.%d.0/24", i%250), PodCIDRs: []string{fmt.Sprintf("172.20.%d.0/24", i%250)}, ProviderID: fmt.Sprintf("cloud://cn-hangzhou.i-bp1%016d", i)},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32408044Ki"),
				corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("123722704Ki")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7910m"), corev1.ResourceMemory: resource.MustParse("29253868Ki"),
				corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("114022843818")},
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032d", i), SystemUUID: fmt.Sprintf("%036d", i), BootID: fmt.Sprintf("%036d", i+1),
				KernelVersion: "5.10.134-16.3.al8.x86_64", OSImage: "Alibaba Cloud Linux 3.2104 U10", ContainerRuntimeVersion: "containerd://1.7.22",
				KubeletVersion: "v1.35.4", OperatingSystem: "linux", Architecture: "amd64"},
			Images:          images,
			VolumesInUse:    []corev1.UniqueVolumeName{"kubernetes.io/csi/diskplugin.csi.example.com^d-bp1aaaa", "kubernetes.io/csi/diskplugin.csi.example.com^d-bp1bbbb"},
			VolumesAttached: []corev1.AttachedVolume{{Name: "kubernetes.io/csi/diskplugin.csi.example.com^d-bp1aaaa", DevicePath: ""}, {Name: "kubernetes.io/csi/diskplugin.csi.example.com^d-bp1bbbb", DevicePath: ""}},
		},
	}
}

// BenchmarkCachedNodeBytes reports what a member node (kubeletNode) holds
// in the member node cache of a flotilla-node.
func BenchmarkCachedNodeBytes(b *testing.B) {
	benchmarkMemberHeld(b, 500, "node-B/node", func(i int) kruntime.Object {
		n := kubeletNode(i)
		n.APIVersion, n.Kind = "v1", "Node"
		return n
	})
}

// BenchmarkCachedForeignPodBytes reports what a member pod flotilla did
// not forward (the member's own, nativePod) holds in the member pod cache
// of a flotilla-node.
func BenchmarkCachedForeignPodBytes(b *testing.B) {
	benchmarkMemberHeld(b, 2000, "foreign-B/pod", func(i int) kruntime.Object {
		p := podcachetest.NativePod(i)
		p.APIVersion, p.Kind = "v1", "Pod"
		return p
	})
}

// benchmarkMemberHeld reports as unit what each of n objects (the i-th
// made by obj) holds once decoded from protobuf, as a watch delivers it,
// and transformed as the member informers do.
func benchmarkMemberHeld(b *testing.B, n int, unit string, obj func(int) kruntime.Object) {
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var wire [][]byte
	for i := range n {
		data, err := kruntime.Encode(codec, obj(i))
		if err != nil {
			b.Fatal(err)
		}
		wire = append(wire, data)
	}
	memberT := MemberPodTransform("host-1")
	var held float64
	for b.Loop() {
		held = podcachetest.HeldDecoded(b, wire, memberT)
	}
	b.ReportMetric(held, unit)
}

// cachedPodsWire is n forwarded pods as a watch delivers them: the host
// pods, then the member pods, encoded.
func cachedPodsWire(b testing.TB, n int) [2][][]byte {
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var wire [2][][]byte
	for i := range n {
		h, m := cachedPods(i)
		for side, p := range []*corev1.Pod{h, m} {
			p.APIVersion, p.Kind = "v1", "Pod"
			data, err := kruntime.Encode(codec, p)
			if err != nil {
				b.Fatal(err)
			}
			wire[side] = append(wire[side], data)
		}
	}
	return wire
}

// BenchmarkCachedPodBytes reports what a forwarded pod holds in the two pod
// caches of a flotilla-node: the host pod and the member pod, decoded from
// protobuf as a watch delivers them and transformed as the informers do.
func BenchmarkCachedPodBytes(b *testing.B) {
	wire := cachedPodsWire(b, 2000)
	hostT := HostPodsTransform([]string{"beijing"}, func() cache.Store { return nil })
	memberT := MemberPodTransform("host-1")
	var host, member, both float64
	for b.Loop() {
		host, member = podcachetest.HeldDecoded(b, wire[0], hostT), podcachetest.HeldDecoded(b, wire[1], memberT)
		// Both sides of each pod, member first as a burst brings them,
		// with no container statuses of another run to share.
		containerStatuses.reset()
		decoded := 0
		both = podcachetest.HeldDecoded(b, slices.Concat(wire[1], wire[0]), func(obj any) (any, error) {
			if decoded++; decoded <= len(wire[1]) {
				return memberT(obj)
			}
			return hostT(obj)
		}) * 2
	}
	b.ReportMetric(host, "host-B/pod")
	b.ReportMetric(member, "member-B/pod")
	b.ReportMetric(both, "both-B/pod")
}

// reset empties the table.
func (t *table[V]) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m = nil
}

// TestTransformsShareWhatPodsShare: two pods of one workload, decoded
// apart, share after the transforms the strings, labels, owner references
// and tolerations they have in common, and still read exactly as
// decoded; what is a pod's own (a member pod's host UID) stays its own.
func TestTransformsShareWhatPodsShare(t *testing.T) {
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	hostT := HostPodsTransform([]string{"beijing"}, func() cache.Store { return nil })
	memberT := MemberPodTransform("host-1")
	decodeAny := func(p *corev1.Pod, transform cache.TransformFunc) (any, *corev1.Pod) {
		t.Helper()
		p.APIVersion, p.Kind = "v1", "Pod"
		data, err := kruntime.Encode(codec, p)
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := codec.Decode(data, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := obj.(*corev1.Pod).DeepCopy()
		got, err := transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		return got, want
	}
	decode := func(p *corev1.Pod, transform cache.TransformFunc) (*corev1.Pod, *corev1.Pod) {
		t.Helper()
		got, want := decodeAny(p, transform)
		return got.(*corev1.Pod), want
	}
	decodeMember := func(p *corev1.Pod) (*memberpod.Pod, *corev1.Pod) {
		t.Helper()
		got, want := decodeAny(p, memberT)
		return got.(*memberpod.Pod), want
	}
	h1, m1 := cachedPods(1)
	h2, m2 := cachedPods(2)
	a, wantA := decode(h1, hostT)
	b, _ := decode(h2, hostT)
	trimHostSpec(&wantA.Spec)
	if d := cmp.Diff(wantA, a); d != "" {
		t.Errorf("a host pod reads otherwise once transformed (-want +got):\n%s", d)
	}
	same := func(what string, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are not one string", what, x, y)
		}
	}
	same("image", a.Spec.Containers[0].Image, b.Spec.Containers[0].Image)
	same("condition type", string(a.Status.Conditions[0].Type), string(b.Status.Conditions[0].Type))
	same("image ID", a.Status.ContainerStatuses[0].ImageID, b.Status.ContainerStatuses[0].ImageID)
	same("namespace", a.Namespace, b.Namespace)
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two replicas' equal labels are two maps")
	}
	if &a.OwnerReferences[0] != &b.OwnerReferences[0] || &a.Spec.Tolerations[0] != &b.Spec.Tolerations[0] {
		t.Error("two replicas' equal owner references or tolerations are two arrays")
	}
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] || a.Spec.Volumes[0].Projected != b.Spec.Volumes[0].Projected {
		t.Error("two replicas' equal containers or token projections are not shared")
	}
	if a.Spec.Volumes[0].Name == b.Spec.Volumes[0].Name {
		t.Error("two pods' token volumes have one name")
	}
	if &a.Status.Conditions[0] != &b.Status.Conditions[0] {
		t.Error("the equal conditions of two pods started in the same second are two arrays")
	}
	later, _ := cachedPods(60)
	if l, _ := decode(later, hostT); &l.Status.Conditions[0] == &a.Status.Conditions[0] {
		t.Error("a pod started a second later shares the conditions of the earlier ones")
	}
	// A shared array is full: appending to one pod's copies it.
	more := append(a.Spec.Tolerations, corev1.Toleration{Key: "x"})
	if &more[0] == &b.Spec.Tolerations[0] {
		t.Error("appending to a pod's tolerations writes into the shared array")
	}

	c, wantC := decodeMember(m1)
	d, _ := decodeMember(m2)
	// The host UID is a field, and the rest of the labels are shared.
	wantLabels := maps.Clone(wantC.Labels)
	delete(wantLabels, wellknown.HostUIDLabel)
	if d := cmp.Diff(wantLabels, c.Labels); d != "" || string(c.HostUID) != wantC.Labels[wellknown.HostUIDLabel] {
		t.Errorf("member pod labels (-want +got), host UID %q:\n%s", c.HostUID, d)
	}
	if reflect.ValueOf(c.Labels).UnsafePointer() != reflect.ValueOf(d.Labels).UnsafePointer() {
		t.Error("two member replicas' labels are two maps")
	}
	if d := cmp.Diff(wantC.Status, c.Status); d != "" {
		t.Errorf("member pod status (-want +got):\n%s", d)
	}
	same("managed-by label", c.Labels[wellknown.ManagedByLabel], d.Labels[wellknown.ManagedByLabel])
	if c.HostUID == d.HostUID {
		t.Error("two member pods have one host UID")
	}
	// A host pod's container statuses are its member pod's: one array.
	if &a.Status.ContainerStatuses[0] != &c.Status.ContainerStatuses[0] {
		t.Error("a host pod and its member pod keep their equal container statuses twice")
	}
	restarted := m1.DeepCopy()
	restarted.Status.ContainerStatuses[0].RestartCount = 1
	if r, _ := decodeMember(restarted); &r.Status.ContainerStatuses[0] == &a.Status.ContainerStatuses[0] || r.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Error("a member pod's changed container statuses are its host pod's earlier ones")
	}
	// Their host pods' names are their own: one annotation map serves both.
	if reflect.ValueOf(c.Annotations).UnsafePointer() != reflect.ValueOf(d.Annotations).UnsafePointer() {
		t.Error("two member replicas' annotations are two maps")
	}
	if _, name := HostKeyOf(d); name != m2.Name {
		t.Errorf("the second member pod stands for host pod %q, want %q", name, m2.Name)
	}
}

// TestTableStartsAfreshPastItsLimit: a table keeps at most its limit of
// values, so what no pod has any more does not stay for ever.
func TestTableStartsAfreshPastItsLimit(t *testing.T) {
	tb := table[*int]{limit: 2}
	one, two, three := new(int), new(int), new(int)
	if tb.intern("1", one) != one || tb.intern("2", two) != two || tb.intern("1", new(int)) != one {
		t.Fatal("a table does not keep its first values")
	}
	tb.intern("3", three)
	if len(tb.m) != 1 || tb.intern("1", new(int)) == one {
		t.Errorf("past its limit a table keeps %d values, and the first", len(tb.m))
	}
}

// BenchmarkPodTransform reports what a watch event of a forwarded pod costs
// to decode and transform, as the host and member pod informers do, per
// pod (one event of each side).
func BenchmarkPodTransform(b *testing.B) {
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	const n = 500
	wire := cachedPodsWire(b, n)
	transforms := [2]cache.TransformFunc{HostPodsTransform([]string{"beijing"}, func() cache.Store { return nil }), MemberPodTransform("host-1")}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for side, t := range transforms {
			obj, _, err := codec.Decode(wire[side][i%n], nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := t(obj); err != nil {
				b.Fatal(err)
			}
		}
		i++
	}
}

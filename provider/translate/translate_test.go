package translate

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/wellknown"
)

func hostPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "shop", UID: "uid-1", ResourceVersion: "42",
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-abc", UID: "rs"}},
			Finalizers:      []string{"example.com/f"},
		},
		Spec: corev1.PodSpec{
			NodeName:         "beijing",
			Priority:         ptr.To[int32](100),
			PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
			Containers:       []corev1.Container{{Name: "c", Image: "nginx:1", VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets"}, {Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{
				{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
	}
}

func TestToMember(t *testing.T) {
	target := Target{Cluster: "beijing", Namespace: "shop-beijing", Installation: "host-1"}
	cases := map[string]struct {
		mutate func(*corev1.Pod)
		check  func(t *testing.T, m *corev1.Pod)
	}{
		"identity and metadata": {
			check: func(t *testing.T, m *corev1.Pod) {
				want := metav1.ObjectMeta{
					Name: "web-1", Namespace: "shop-beijing",
					Labels: map[string]string{"app": "web", wellknown.ClusterLabel: "beijing", wellknown.HostUIDLabel: "uid-1",
						wellknown.ManagedByLabel: wellknown.ManagedByValue, wellknown.InstallationLabel: "host-1"},
					Annotations: map[string]string{"note": "x", wellknown.HostNamespaceAnnotation: "shop", wellknown.HostNameAnnotation: "web-1"},
				}
				if d := cmp.Diff(want, m.ObjectMeta); d != "" {
					t.Errorf("metadata (-want +got):\n%s", d)
				}
				if m.Spec.NodeName != "" || m.Spec.Priority != nil || m.Spec.PreemptionPolicy != nil {
					t.Errorf("nodeName/priority not cleared: %q %v %v", m.Spec.NodeName, m.Spec.Priority, m.Spec.PreemptionPolicy)
				}
				if m.Status.Phase != "" {
					t.Errorf("status not cleared: %v", m.Status.Phase)
				}
			},
		},
		"host service account token removed, other volumes kept": {
			check: func(t *testing.T, m *corev1.Pod) {
				if len(m.Spec.Volumes) != 1 || m.Spec.Volumes[0].Name != "data" {
					t.Errorf("volumes = %+v", m.Spec.Volumes)
				}
				if ms := m.Spec.Containers[0].VolumeMounts; len(ms) != 1 || ms[0].Name != "data" {
					t.Errorf("mounts = %+v", ms)
				}
			},
		},
		"host-only nodeSelector entries removed": {
			mutate: func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{
					wellknown.ClusterLabel: "beijing", "kubernetes.io/hostname": "beijing", "type": "virtual-kubelet",
					"kubernetes.io/os": "linux", "disk": "ssd",
				}
			},
			check: func(t *testing.T, m *corev1.Pod) {
				want := map[string]string{"kubernetes.io/os": "linux", "disk": "ssd"}
				if d := cmp.Diff(want, m.Spec.NodeSelector); d != "" {
					t.Errorf("nodeSelector (-want +got):\n%s", d)
				}
			},
		},
		"a member node's hostname in the selector reaches the member": {
			mutate: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "edge-7"} },
			check: func(t *testing.T, m *corev1.Pod) {
				if m.Spec.NodeSelector["kubernetes.io/hostname"] != "edge-7" {
					t.Errorf("nodeSelector = %v", m.Spec.NodeSelector)
				}
			},
		},
		"virtual node toleration removed, others kept": {
			mutate: func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{
					{Key: wellknown.ProviderTaintKey, Operator: corev1.TolerationOpEqual, Value: "flotilla", Effect: corev1.TaintEffectNoSchedule},
					{Key: "gpu", Operator: corev1.TolerationOpExists},
				}
			},
			check: func(t *testing.T, m *corev1.Pod) {
				want := []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
				if d := cmp.Diff(want, m.Spec.Tolerations); d != "" {
					t.Errorf("tolerations (-want +got):\n%s", d)
				}
			},
		},
		"required affinity satisfied by the host is dropped": {
			mutate: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"beijing", "hangzhou"}}}},
					}},
				}}
			},
			check: func(t *testing.T, m *corev1.Pod) {
				if m.Spec.Affinity != nil {
					t.Errorf("affinity = %+v, want nil", m.Spec.Affinity)
				}
			},
		},
		"DaemonSet matchFields dropped, member expressions kept": {
			mutate: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}},
						MatchFields:      []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"beijing"}}},
					}}},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
						{Weight: 5, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ProviderLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"aws"}}}}},
						{Weight: 7, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
					},
				}}
			},
			check: func(t *testing.T, m *corev1.Pod) {
				want := &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}},
					}}},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
						{Weight: 7, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
					},
				}
				if d := cmp.Diff(want, m.Spec.Affinity.NodeAffinity); d != "" {
					t.Errorf("node affinity (-want +got):\n%s", d)
				}
			},
		},
		"spread over clusters stays in the host, spread over member nodes goes through": {
			mutate: func(p *corev1.Pod) {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
					{TopologyKey: wellknown.ClusterLabel, MaxSkew: 1},
					{TopologyKey: "kubernetes.io/hostname", MaxSkew: 1},
				}
			},
			check: func(t *testing.T, m *corev1.Pod) {
				want := []corev1.TopologySpreadConstraint{{TopologyKey: "kubernetes.io/hostname", MaxSkew: 1}}
				if d := cmp.Diff(want, m.Spec.TopologySpreadConstraints); d != "" {
					t.Errorf("spread (-want +got):\n%s", d)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			host := hostPod()
			if tc.mutate != nil {
				tc.mutate(host)
			}
			before := host.DeepCopy()
			m := ToMember(host, target)
			tc.check(t, m)
			if d := cmp.Diff(before, host); d != "" {
				t.Errorf("ToMember modified its input:\n%s", d)
			}
		})
	}
}

func TestHostViewRoundTrip(t *testing.T) {
	target := Target{Cluster: "beijing", Namespace: "shop"}
	host := hostPod()
	host.Spec.Tolerations = []corev1.Toleration{{Key: wellknown.ProviderTaintKey, Operator: corev1.TolerationOpExists}}
	member := ToMember(host, target)
	member.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.5", QOSClass: corev1.PodQOSBestEffort}

	v := HostView(host, memberpod.New(member), target)
	if d := cmp.Diff(host.Labels, v.Labels); d != "" {
		t.Errorf("labels (-host +view):\n%s", d)
	}
	if d := cmp.Diff(host.Spec, v.Spec); d != "" {
		t.Errorf("an unchanged member pod must look like its host pod (-host +view):\n%s", d)
	}
	if v.Status.PodIP != "10.1.0.5" || v.Status.Phase != corev1.PodRunning {
		t.Errorf("status = %+v", v.Status)
	}

	member.Spec.Containers[0].Image = "nginx:old"
	if v := HostView(host, memberpod.New(member), target); v.Spec.Containers[0].Image != "nginx:old" {
		t.Errorf("image drift not visible: %s", v.Spec.Containers[0].Image)
	}
}

func TestHostStatus(t *testing.T) {
	host := hostPod()
	host.Generation = 3
	host.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"},
	}
	start := metav1.NewTime(time.Unix(1000, 0))
	member := &corev1.Pod{Status: corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.1.0.5", PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}},
		HostIP: "10.250.1.1", StartTime: &start, NominatedNodeName: "member-node-1",
		QOSClass: corev1.PodQOSGuaranteed,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, ObservedGeneration: 1},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, ObservedGeneration: 1},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 2}},
	}}
	got := HostStatus(host, &member.Status)
	want := corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.1.0.5", PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}},
		HostIP: "10.250.1.1", StartTime: &start, QOSClass: corev1.PodQOSBestEffort, ObservedGeneration: 3,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, ObservedGeneration: 3},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, ObservedGeneration: 3},
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 2}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("HostStatus (-want +got):\n%s", d)
	}
}

func TestStatusMatters(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(1000, 0)), metav1.NewTime(time.Unix(2000, 0))
	scheduled := func(at metav1.Time, gen int64) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at, ObservedGeneration: gen}
	}
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t1}
	host := corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{scheduled(t0, 1)}}
	for _, tc := range []struct {
		name string
		cur  corev1.PodStatus
		want func(s *corev1.PodStatus)
		ok   bool
	}{
		{"member's own PodScheduled and first observed generation", host, func(s *corev1.PodStatus) {
			s.ObservedGeneration = 1
			s.Conditions = []corev1.PodCondition{scheduled(t1, 0)}
		}, false},
		{"conditions reordered", corev1.PodStatus{Conditions: []corev1.PodCondition{ready, scheduled(t0, 0)}}, func(s *corev1.PodStatus) {
			s.Conditions = []corev1.PodCondition{scheduled(t0, 0), ready}
		}, false},
		{"running and ready", host, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodRunning
			s.Conditions = append(s.Conditions, ready)
		}, true},
		{"member unschedulable", host, func(s *corev1.PodStatus) {
			s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}
		}, true},
		{"a new generation observed", corev1.PodStatus{ObservedGeneration: 1}, func(s *corev1.PodStatus) {
			s.ObservedGeneration = 2
		}, true},
		{"pod IP", host, func(s *corev1.PodStatus) { s.PodIP = "10.1.0.5" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := *tc.cur.DeepCopy()
			tc.want(&want)
			if got := StatusMatters(tc.cur, want); got != tc.ok {
				t.Errorf("StatusMatters = %v, want %v", got, tc.ok)
			}
		})
	}
}

// TestStatusMattersAsSortedCopies: StatusMatters compares conditions as
// copies sorted by type, the last of each type kept, without their times
// and observed generation, would compare: checked on random pairs of
// condition lists with repeated types, missing types and changed fields.
func TestStatusMattersAsSortedCopies(t *testing.T) {
	byCopy := func(s corev1.PodStatus) corev1.PodStatus {
		byType := map[corev1.PodConditionType]corev1.PodCondition{}
		for _, c := range s.Conditions {
			c.LastProbeTime, c.LastTransitionTime, c.ObservedGeneration = metav1.Time{}, metav1.Time{}, 0
			byType[c.Type] = c
		}
		s.Conditions = nil
		for _, t := range slices.Sorted(maps.Keys(byType)) {
			s.Conditions = append(s.Conditions, byType[t])
		}
		return s
	}
	rng := rand.New(rand.NewPCG(1, 2))
	types := []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReady, corev1.ContainersReady, corev1.PodInitialized}
	conditions := func() []corev1.PodCondition {
		var cs []corev1.PodCondition
		for range rng.IntN(6) {
			cs = append(cs, corev1.PodCondition{Type: types[rng.IntN(len(types))],
				Status: []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse}[rng.IntN(2)],
				Reason: []string{"", "Unschedulable"}[rng.IntN(2)], ObservedGeneration: int64(rng.IntN(2)),
				LastTransitionTime: metav1.NewTime(time.Unix(int64(rng.IntN(2)), 0))})
		}
		return cs
	}
	differ := 0
	for range 5000 {
		cur, want := corev1.PodStatus{Conditions: conditions()}, corev1.PodStatus{Conditions: conditions()}
		if rng.IntN(3) == 0 {
			want.Conditions = slices.Clone(cur.Conditions)
			rng.Shuffle(len(want.Conditions), func(i, j int) { want.Conditions[i], want.Conditions[j] = want.Conditions[j], want.Conditions[i] })
		}
		expect := !equality.Semantic.DeepEqual(byCopy(cur), byCopy(want))
		if expect {
			differ++
		}
		if got := StatusMatters(cur, want); got != expect {
			t.Fatalf("StatusMatters(%+v, %+v) = %v, want %v", cur.Conditions, want.Conditions, got, expect)
		}
	}
	if differ == 0 || differ == 5000 {
		t.Errorf("%d of 5000 pairs differ: the walk tells nothing", differ)
	}
}

// TestToMemberRestoresTheMembersConstraints: a pod whose node constraints
// placement replaced in the host (by "the clusters where a disk=ssd node
// is") reaches the member with its own selector, to find that node.
func TestToMemberRestoresTheMembersConstraints(t *testing.T) {
	host := hostPod()
	host.Spec.NodeSelector = nil
	host.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}, {Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpDoesNotExist}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"beijing"}}}},
		},
	}}}
	host.Annotations = map[string]string{wellknown.MemberConstraintsAnnotation: `{"nodeSelector":{"disk":"ssd"}}`}
	m := ToMember(host, Target{Cluster: "beijing", Namespace: "shop"})
	if got := m.Spec.NodeSelector; len(got) != 1 || got["disk"] != "ssd" {
		t.Errorf("member nodeSelector = %v, want disk=ssd", got)
	}
	if m.Spec.Affinity != nil && m.Spec.Affinity.NodeAffinity != nil {
		t.Errorf("member node affinity = %+v, want none (the pod had none of its own)", m.Spec.Affinity.NodeAffinity)
	}
	if _, ok := m.Annotations[wellknown.MemberConstraintsAnnotation]; ok {
		t.Error("the member pod carries the host's bookkeeping annotation")
	}
}

// TestEphemeralContainers: an ephemeral container reaches the member as
// the host has it (target, environment, mounts of mirrored volumes) but for
// the host's token mount, and the host view shows it only once the member
// pod has it, which is what makes virtual-kubelet call UpdatePod.
func TestEphemeralContainers(t *testing.T) {
	target := Target{Cluster: "beijing", Namespace: "shop"}
	host := hostPod()
	dbg := corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "dbg", Image: "busybox", Command: []string{"sleep", "3600"},
			EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets"}, {Name: "data", MountPath: "/data"}},
		},
		TargetContainerName: "c",
	}
	host.Spec.EphemeralContainers = []corev1.EphemeralContainer{dbg}

	if m := ToMember(host, target); len(m.Spec.EphemeralContainers) != 0 {
		t.Errorf("ToMember kept ephemeral containers %v: they cannot be set on create", m.Spec.EphemeralContainers)
	}
	want := *dbg.DeepCopy()
	want.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	got := EphemeralToMember(host)
	if d := cmp.Diff([]corev1.EphemeralContainer{want}, got); d != "" {
		t.Errorf("EphemeralToMember (-want +got):\n%s", d)
	}
	if len(host.Spec.EphemeralContainers[0].VolumeMounts) != 2 {
		t.Error("EphemeralToMember changed the host pod")
	}

	member := ToMember(host, target)
	if v := HostView(host, memberpod.New(member), target); len(v.Spec.EphemeralContainers) != 0 {
		t.Errorf("host view of a member pod without the ephemeral container shows %v", v.Spec.EphemeralContainers)
	}
	member.Spec.EphemeralContainers = got
	if v := HostView(host, memberpod.New(member), target); !equality.Semantic.DeepEqual(v.Spec, host.Spec) {
		t.Errorf("host view of a member pod with the ephemeral container differs from the host pod: %s", cmp.Diff(host.Spec, v.Spec))
	}
	if missing := MissingEphemeral(member.Spec.EphemeralContainers, append(got, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg2"}})); len(missing) != 1 || missing[0].Name != "dbg2" {
		t.Errorf("MissingEphemeral = %v, want dbg2 alone", missing)
	}
}

// TestHostStatusKeepsEphemeralContainerStatuses: kubectl debug -it waits
// for the host pod's status of its container.
func TestHostStatusKeepsEphemeralContainerStatuses(t *testing.T) {
	host := hostPod()
	member := corev1.PodStatus{Phase: corev1.PodRunning, EphemeralContainerStatuses: []corev1.ContainerStatus{{
		Name: "dbg", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}}}
	s := HostStatus(host, &member)
	if len(s.EphemeralContainerStatuses) != 1 || s.EphemeralContainerStatuses[0].State.Running == nil {
		t.Errorf("host status ephemeral containers = %v", s.EphemeralContainerStatuses)
	}
	if !StatusMatters(host.Status, s) {
		t.Error("a debugging container that started does not matter to the host status")
	}
}

// TestSamePhaseAndConditions: what other writers than a kubelet change of
// a pod's status is told apart, re-stamps and the rest of the status are
// not.
func TestSamePhaseAndConditions(t *testing.T) {
	now := time.Now()
	running := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}}}
	with := func(change func(*corev1.PodStatus)) corev1.PodStatus {
		s := *running.DeepCopy()
		change(&s)
		return s
	}
	for name, c := range map[string]struct {
		b    corev1.PodStatus
		want bool
	}{
		"same":            {with(func(*corev1.PodStatus) {}), true},
		"re-stamped":      {with(func(s *corev1.PodStatus) { s.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(time.Minute)) }), true},
		"marked NotReady": {with(func(s *corev1.PodStatus) { s.Conditions[0].Status = corev1.ConditionFalse }), false},
		"failed":          {with(func(s *corev1.PodStatus) { s.Phase = corev1.PodFailed }), false},
		"a condition added": {with(func(s *corev1.PodStatus) {
			s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue})
		}), false},
		"another field": {with(func(s *corev1.PodStatus) { s.PodIP = "10.0.0.8" }), true},
	} {
		if got := SamePhaseAndConditions(&running, &c.b); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

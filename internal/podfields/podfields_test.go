package podfields

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// served reads the Pod schema of a real Kubernetes release: the OpenAPI v3
// document of api/v1 as published in k8s.io/kubernetes at that tag,
// trimmed to the Pod's schemas without descriptions.
func served(t *testing.T, version string) Set {
	t.Helper()
	b, err := os.ReadFile("testdata/pod-" + version + ".json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Served(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKnownWalksJSONNames(t *testing.T) {
	k := Known()
	for path, leaf := range map[string]bool{
		"kind":                                 true, // inlined TypeMeta
		"metadata.labels":                      true,
		"spec":                                 false,
		"spec.containers":                      false,
		"spec.containers[].image":              true,
		"spec.containers[].resources.requests": true, // a map
		"spec.containers[].ports[].hostPort":   true,
		"spec.volumes[].emptyDir.sizeLimit":    true, // a quantity
		"spec.schedulingGroup":                 false,
		"status.startTime":                     true, // a time
	} {
		got, ok := k[path]
		if !ok || got != leaf {
			t.Errorf("Known()[%q] = %v, %v; want %v, true", path, got, ok, leaf)
		}
	}
	// k8s.io/api v0.37 tombstoned spec.workloadRef (1.35 only).
	if k.Has("spec.workloadRef") {
		t.Error("Known() has spec.workloadRef, which k8s.io/api v0.37 no longer holds")
	}
}

func TestMissingAgainstRealReleases(t *testing.T) {
	known := Known()
	// flotilla links the newest served release: it knows every pod field
	// the v1.37.2 API serves, and that API every field flotilla knows.
	if got := Missing(known, served(t, "v1.37.2")); len(got) != 0 {
		t.Errorf("v1.37.2 lacks %v of flotilla's pod fields, want none", got)
	}
	v134 := Missing(known, served(t, "v1.34.4"), "spec", "metadata")
	for _, want := range []string{
		"spec.schedulingGroup",              // 1.36
		"spec.evictionResponders",           // 1.37
		"spec.volumes[].emptyDir.mode",      // 1.37
		"spec.volumes[].secret.defaultUser", // 1.37
	} {
		if !slices.Contains(v134, want) {
			t.Errorf("Missing(v1.34.4) = %v, want it to hold %s", v134, want)
		}
	}
	// A field missing with its whole object is named once, by the object.
	if slices.Contains(v134, "spec.schedulingGroup.podGroupName") {
		t.Errorf("Missing(v1.34.4) names spec.schedulingGroup.podGroupName besides spec.schedulingGroup")
	}
	for _, p := range v134 {
		if !strings.HasPrefix(p, "spec.") && !strings.HasPrefix(p, "metadata.") {
			t.Errorf("Missing(..., spec, metadata) returned %s", p)
		}
	}
	v135 := Missing(known, served(t, "v1.35.4"), "spec")
	if !slices.Contains(v135, "spec.schedulingGroup") || slices.Contains(v135, "spec.workloadRef") {
		t.Errorf("Missing(v1.35.4) = %v, want spec.schedulingGroup in it and no spec.workloadRef", v135)
	}
	// The other way round: what v1.35.4 serves that flotilla does not
	// know (a host of that version would pass it through flotilla's
	// types lost).
	if got := Missing(served(t, "v1.35.4"), known, "spec"); !slices.Equal(got, []string{"spec.workloadRef"}) {
		t.Errorf("Missing(v1.35.4 served, known) = %v, want [spec.workloadRef]", got)
	}
}

func TestSets(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "a"}, {Name: "b", Ports: []corev1.ContainerPort{{HostPort: 80}}}},
		Volumes:    []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Mode: ptr.To[int32](0o700)}}}},
		HostUsers:  ptr.To(false),
	}}
	for path, want := range map[string]bool{
		"spec.containers":                    true,
		"spec.containers[].ports[].hostPort": true,
		"spec.containers[].image":            false,
		"spec.volumes[].emptyDir.mode":       true,
		"spec.volumes[].secret.defaultUser":  false,
		"spec.schedulingGroup":               false,
		"spec.hostUsers":                     true, // a pointer to false
		"spec.noSuchField":                   false,
		"metadata.name":                      false,
	} {
		if got := Sets(pod, path); got != want {
			t.Errorf("Sets(%s) = %v, want %v", path, got, want)
		}
	}
	var obj map[string]any
	b, _ := json.Marshal(pod)
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"spec.volumes[].emptyDir.mode":       true,
		"spec.containers[].ports[].hostPort": true,
		"spec.containers[].image":            false,
		"spec.hostUsers":                     true,
		"spec.workloadRef":                   false,
	} {
		if got := SetsJSON(obj, path); got != want {
			t.Errorf("SetsJSON(%s) = %v, want %v", path, got, want)
		}
	}
}

func TestLost(t *testing.T) {
	sent := corev1.PodSpec{
		Containers:  []corev1.Container{{Name: "a", Image: "i", ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: "NotRequired"}}}},
		Volumes:     []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Mode: ptr.To[int32](0o700)}}}},
		Tolerations: []corev1.Toleration{{Key: "k", Operator: "Exists"}},
		HostUsers:   ptr.To(false),
	}
	// What a member with EmptyDirVolumeMode and UserNamespacesSupport off
	// stores: the fields cleared, defaults and admission's additions in.
	stored := *sent.DeepCopy()
	stored.Volumes[0].EmptyDir.Mode = nil
	stored.HostUsers = nil
	stored.SchedulerName = "default-scheduler"
	stored.Tolerations = append(stored.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/not-ready"})
	stored.Volumes = append(stored.Volumes, corev1.Volume{Name: "kube-api-access-x"})
	got := Lost(&sent, &stored)
	if diff := cmp.Diff([]string{"spec.hostUsers", "spec.volumes[].emptyDir.mode"}, got); diff != "" {
		t.Errorf("Lost (-want +got):\n%s", diff)
	}
	if got := Lost(&sent, sent.DeepCopy()); len(got) != 0 {
		t.Errorf("Lost of an unchanged spec = %v, want none", got)
	}
}

func TestUnknownInError(t *testing.T) {
	// As a v1.34 apiserver answers a create with fieldValidation=Strict.
	msg := errors.New(`Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.volumes[0].emptyDir.mode", unknown field "spec.volumes[2].emptyDir.mode", unknown field "spec.schedulingGroup"`)
	got := UnknownInError(msg)
	if diff := cmp.Diff([]string{"spec.schedulingGroup", "spec.volumes[].emptyDir.mode"}, got); diff != "" {
		t.Errorf("UnknownInError (-want +got):\n%s", diff)
	}
	if got := UnknownInError(errors.New(`pods "x" is forbidden`)); got != nil {
		t.Errorf("UnknownInError of another error = %v", got)
	}
}

func TestMemberKeepsWhatItLearns(t *testing.T) {
	m := &Member{}
	changes := 0
	m.OnChange(func() { changes++ })
	m.Served("v1.36.3", []string{"spec.evictionResponders"})
	if !m.Dropped("spec.volumes[].emptyDir.mode", "spec.hostUsers") || m.Dropped("spec.hostUsers") {
		t.Error("Dropped reports a new field as known or a known one as new")
	}
	m.Unknown("spec.evictionResponders")
	want := MemberFields{Version: "v1.36.3", Unknown: []string{"spec.evictionResponders"}, Dropped: []string{"spec.hostUsers", "spec.volumes[].emptyDir.mode"}}
	if diff := cmp.Diff(want, m.Fields()); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
	if changes != 2 {
		t.Errorf("%d changes told, want 2", changes)
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{HostUsers: ptr.To(false)}}
	if r, ok := m.Fields().Refuses(func(p string) bool { return Sets(pod, p) }); !ok || r != (Refusal{Path: "spec.hostUsers", Dropped: true}) {
		t.Errorf("Refuses = %+v, %v", r, ok)
	}
	// An upgraded member may have its gates on: what it dropped is
	// forgotten.
	m.Served("v1.37.2", nil)
	if f := m.Fields(); len(f.Dropped) != 0 || len(f.Unknown) != 0 {
		t.Errorf("after an upgrade: %+v", f)
	}
}

// BenchmarkLost is the comparison every pod create pays: a pod of two
// containers with probes, mounts and environment, stored as sent plus
// the defaults and admission's additions.
func BenchmarkLost(b *testing.B) {
	c := corev1.Container{Name: "app", Image: "registry.example/app:1.2.3",
		Env:          []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
		Ports:        []corev1.ContainerPort{{ContainerPort: 8080, Protocol: "TCP"}},
		VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}},
			PeriodSeconds: 5},
	}
	sent := corev1.PodSpec{Containers: []corev1.Container{c, *c.DeepCopy()},
		Volumes:     []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}},
		Tolerations: []corev1.Toleration{{Key: "k", Operator: "Exists"}}, NodeSelector: map[string]string{"disk": "ssd"}}
	stored := sent.DeepCopy()
	stored.SchedulerName, stored.RestartPolicy, stored.DNSPolicy = "default-scheduler", "Always", "ClusterFirst"
	b.ReportAllocs()
	for b.Loop() {
		if Lost(&sent, stored) != nil {
			b.Fatal("lost")
		}
	}
}

// BenchmarkSets is what placement pays per pod and cluster for each field
// a member does not know: v1.34.4 lacks some fifty of flotilla's.
func BenchmarkSets(b *testing.B) {
	doc, err := os.ReadFile("testdata/pod-v1.34.4.json")
	if err != nil {
		b.Fatal(err)
	}
	served, err := Served(doc)
	if err != nil {
		b.Fatal(err)
	}
	missing := Missing(Known(), served, "spec", "metadata")
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", LivenessProbe: &corev1.Probe{}}, {Name: "b"}},
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}}}}}
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range missing {
			if Sets(pod, p) {
				b.Fatal(p)
			}
		}
	}
}

package fit

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/builder"
)

// emptyDirMode is a pod with spec.volumes[].emptyDir.mode, a field
// Kubernetes 1.37 added (EmptyDirVolumeMode): v1.34.4 does not know it.
func emptyDirMode() *corev1.Pod {
	p := builder.Pod("").CPU("1").Obj()
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Mode: ptr.To[int32](0o700)}}}}
	return p
}

func TestFieldsAMemberCannotRun(t *testing.T) {
	nodes := []*corev1.Node{builder.Node("a").Hostname().CPU("8").Memory("32Gi").Pods("110").Obj()}
	m := Build(nodes, nil, []NodeShape{})
	m.Kubernetes = "v1.34.4"
	m.UnknownFields = []string{"spec.schedulingGroup", "spec.volumes[].emptyDir.mode"}
	back, err := Decode(m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	c := NewClusterOf("shenzhen", nil, back)

	d := DemandOf(emptyDirMode())
	v := c.Check(d)
	if want := "spec.volumes[].emptyDir.mode is not known to Kubernetes v1.34.4 in cluster shenzhen"; v.Fits || !v.Known || v.Reason != want {
		t.Errorf("Check = %+v, want not fitting, known, %q", v, want)
	}
	if n, known := c.Replicas(d); n != 0 || !known {
		t.Errorf("Replicas = %d, %v; want 0, true", n, known)
	}
	if c.CanGrow(d) {
		t.Error("a node the cluster adds runs a field its Kubernetes does not know")
	}
	if v := c.Check(DemandOf(builder.Pod("").CPU("1").Obj())); !v.Fits {
		t.Errorf("a pod without the fields does not fit: %s", v.Reason)
	}

	back.UnknownFields = nil
	back.DroppedFields = []string{"spec.volumes[].emptyDir.mode"}
	v = NewClusterOf("shenzhen", nil, back).Check(d)
	if want := "spec.volumes[].emptyDir.mode is dropped by Kubernetes v1.34.4 in cluster shenzhen (its feature gate is off there)"; v.Fits || v.Reason != want {
		t.Errorf("Check with the field dropped = %+v, want %q", v, want)
	}
}

// TestModelsOfOtherVersionsDecode: a model without the field lists (an
// older flotilla-node) decodes, and one with them decodes for a reader
// that does not know them.
func TestModelsOfOtherVersionsDecode(t *testing.T) {
	old := `{"resources":["cpu","memory","pods"],"groups":[{"free":[{"n":1,"v":[8000,1,110]}],"largest":[8000,1,110]}]}`
	m, err := Decode(old)
	if err != nil || m.Kubernetes != "" || m.UnknownFields != nil {
		t.Fatalf("Decode(older model) = %+v, %v", m, err)
	}
	if v := NewClusterOf("a", nil, m).Check(DemandOf(emptyDirMode())); !v.Fits {
		t.Errorf("an older model refuses: %s", v.Reason)
	}
	m.Kubernetes, m.UnknownFields = "v1.34.4", []string{"spec.schedulingGroup"}
	var older struct {
		Resources []string `json:"resources"`
	}
	if err := json.Unmarshal([]byte(m.Encode()), &older); err != nil || len(older.Resources) != 3 {
		t.Errorf("an older reader cannot read the model: %v", err)
	}
}

package clusternode

import (
	"slices"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/podfields"
)

// TestNodePublishesWhatTheMemberKnowsOfPods: the fit model carries the
// member's version and the pod fields it does not know or drops, and a
// field found dropped has the node published again.
func TestNodePublishesWhatTheMemberKnowsOfPods(t *testing.T) {
	fields := &podfields.Member{}
	fields.Served("v1.34.4", []string{"spec.schedulingGroup", "spec.volumes[].emptyDir.mode"})
	src, err := NewSource(SourceConfig{
		Node:      Config{Name: "shenzhen", Installation: "host-1"},
		Informers: kube.NewFactory(fake.NewClientset()),
		Health:    &switchableHealth{},
		Fields:    fields,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.cfg.Informers.Nodes().Informer().GetStore().Add(builder.Node("sz-1").Labels(linuxAMD64).CPU("8").Memory("32Gi").Pods("110").Ready().Obj()); err != nil {
		t.Fatal(err)
	}
	model := func() *fit.Model {
		c, err := fit.NewCluster(src.Node())
		if err != nil || c.Model == nil {
			t.Fatalf("no model: %v", err)
		}
		return c.Model
	}
	m := model()
	if m.Kubernetes != "v1.34.4" || !slices.Equal(m.UnknownFields, []string{"spec.schedulingGroup", "spec.volumes[].emptyDir.mode"}) {
		t.Errorf("model says Kubernetes %q, unknown fields %v", m.Kubernetes, m.UnknownFields)
	}
	fields.Dropped("spec.hostUsers")
	select {
	case <-src.urgent:
	default:
		t.Fatal("a dropped field does not have the node rebuilt at once")
	}
	if got := model().DroppedFields; !slices.Equal(got, []string{"spec.hostUsers"}) {
		t.Errorf("dropped fields = %v, want [spec.hostUsers]", got)
	}
	pod := builder.Pod("p").CPU("1").Obj()
	pod.Spec.HostUsers = new(bool)
	c, _ := fit.NewCluster(src.Node())
	if v := c.Check(fit.DemandOf(pod)); v.Fits || v.Reason != "spec.hostUsers is dropped by Kubernetes v1.34.4 in cluster shenzhen (its feature gate is off there)" {
		t.Errorf("Check = %+v", v)
	}
}

package servicebroker

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
)

// TestAPIServed: the broker runs only where the host serves both kinds of
// the API.
func TestAPIServed(t *testing.T) {
	gv := mcsv1beta1.GroupVersion.String()
	for name, tc := range map[string]struct {
		resources []*metav1.APIResourceList
		want      bool
	}{
		"no CRDs": {},
		"both":    {resources: []*metav1.APIResourceList{{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "serviceexports"}, {Name: "serviceimports"}}}}, want: true},
		"exports only": {
			resources: []*metav1.APIResourceList{{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "serviceexports"}}}},
		},
		"another version": {
			resources: []*metav1.APIResourceList{{GroupVersion: "multicluster.x-k8s.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "serviceexports"}, {Name: "serviceimports"}}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}}
			got, err := apiServed(t.Context(), d)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("apiServed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClusterChange: only a virtual node's arrival, departure, cluster or
// import annotations bring exports back, not its heartbeats.
func TestClusterChange(t *testing.T) {
	vn := builder.VirtualNode("beijing").Obj()
	host := builder.Node("host-1").Obj()
	beat := vn.DeepCopy()
	beat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	suffix := builder.VirtualNode("beijing").Annotation(wellknown.NamespaceMappingAnnotation, "Suffix").Obj()
	serving := builder.VirtualNode("beijing").Annotation(wellknown.MultiClusterServicesAnnotation, "v1beta1").Obj()
	renamed := builder.VirtualNode("beijing").Label(wellknown.ClusterLabel, "bj").Obj()
	for name, tc := range map[string]struct {
		passes func() bool
		want   bool
	}{
		"virtual node created": {func() bool { return clusterChange.Create(event.CreateEvent{Object: vn}) }, true},
		"host node created":    {func() bool { return clusterChange.Create(event.CreateEvent{Object: host}) }, false},
		"virtual node deleted": {func() bool { return clusterChange.Delete(event.DeleteEvent{Object: vn}) }, true},
		"heartbeat":            {func() bool { return clusterChange.Update(event.UpdateEvent{ObjectOld: vn, ObjectNew: beat}) }, false},
		"namespace mapping":    {func() bool { return clusterChange.Update(event.UpdateEvent{ObjectOld: vn, ObjectNew: suffix}) }, true},
		"import annotation":    {func() bool { return clusterChange.Update(event.UpdateEvent{ObjectOld: serving, ObjectNew: vn}) }, true},
		"cluster label":        {func() bool { return clusterChange.Update(event.UpdateEvent{ObjectOld: vn, ObjectNew: renamed}) }, true},
	} {
		if got := tc.passes(); got != tc.want {
			t.Errorf("%s: passes %v, want %v", name, got, tc.want)
		}
	}
}

// TestMapper: which Service names a changed object brings back.
func TestMapper(t *testing.T) {
	w := newWorld(t,
		makeExport("web").Obj(), makeService("web").Obj(),
		makeService("dns").Global().Obj(), makeService("plain").Obj(),
	)
	m := &mapper{reader: w.c, log: logrus.New()}
	names := func(reqs []reconcile.Request) []string {
		var out []string
		for _, r := range reqs {
			out = append(out, r.Name)
		}
		slices.Sort(out)
		return out
	}
	relayed := makeRelayedSlice("x-beijing-relay", "api", "beijing", mcs.Export{Cluster: "beijing", Type: mcsv1beta1.ClusterSetIP}).Obj()
	foreignImport := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: testNamespace}}
	ownImport := foreignImport.DeepCopy()
	ownImport.Name, ownImport.Labels = "mine", map[string]string{wellknown.ManagedByLabel: wellknown.ManagedByValue}
	for name, tc := range map[string]struct {
		got  []reconcile.Request
		want []string
	}{
		"exported Service":         {m.service(t.Context(), makeService("web").Obj()), []string{"web"}},
		"global Service":           {m.service(t.Context(), makeService("dns").Global().Obj()), []string{"dns"}},
		"plain Service":            {m.service(t.Context(), makeService("plain").Obj()), nil},
		"exported Service's slice": {m.endpointSlice(t.Context(), makeNativeSlice("web-1", "web").Obj()), []string{"web"}},
		"global Service's slice":   {m.endpointSlice(t.Context(), makeNativeSlice("dns-1", "dns").Obj()), []string{"dns"}},
		"plain Service's slice":    {m.endpointSlice(t.Context(), makeNativeSlice("plain-1", "plain").Obj()), nil},
		"relayed slice":            {m.endpointSlice(t.Context(), relayed), []string{"api"}},
		"the broker's import":      {m.serviceImport(t.Context(), ownImport), []string{"mine"}},
		"another's import":         {m.serviceImport(t.Context(), foreignImport), nil},
		"virtual node":             {m.node(t.Context(), builder.VirtualNode("beijing").Obj()), []string{"dns", "web"}},
		"another controller's slice": {m.endpointSlice(t.Context(), func() client.Object {
			s := makeNativeSlice("web-2", "web").Obj()
			s.Labels["endpointslice.kubernetes.io/managed-by"] = "someone-else"
			return s
		}()), nil},
	} {
		if diff := cmp.Diff(tc.want, names(tc.got)); diff != "" {
			t.Errorf("%s: names (-want +got):\n%s", name, diff)
		}
	}
}

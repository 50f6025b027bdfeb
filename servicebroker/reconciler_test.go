package servicebroker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
)

// world is the broker over a fake host holding objs.
type world struct {
	t      *testing.T
	r      *reconciler
	c      client.Client
	events *events.FakeRecorder
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := mcsv1beta1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&mcsv1beta1.ServiceExport{}, &mcsv1beta1.ServiceImport{}).Build()
	rec := events.NewFakeRecorder(100)
	log := logrus.New()
	log.SetOutput(testWriter{t})
	return &world{t: t, r: &reconciler{client: c, recorder: rec, log: log}, c: c, events: rec}
}

// testWriter sends the broker's logs to the test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// reconcile brokers Service name of testNamespace once.
func (w *world) reconcile(name string) {
	w.t.Helper()
	if _, err := w.r.Reconcile(w.t.Context(), reconcile.Request{NamespacedName: key(name)}); err != nil {
		w.t.Fatalf("reconcile %s: %v", name, err)
	}
}

func key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: testNamespace, Name: name}
}

// brokerSlices are the broker's slices of service, by source cluster.
func (w *world) brokerSlices(service string) map[string]*discoveryv1.EndpointSlice {
	w.t.Helper()
	var l discoveryv1.EndpointSliceList
	if err := w.c.List(w.t.Context(), &l, client.InNamespace(testNamespace), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: service, discoveryv1.LabelManagedBy: wellknown.BrokerManagedBy,
	}); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]*discoveryv1.EndpointSlice{}
	for i := range l.Items {
		c := l.Items[i].Labels[mcsv1beta1.LabelSourceCluster]
		if _, dup := out[c]; dup {
			w.t.Errorf("two broker slices of %s for cluster %s", service, c)
		}
		out[c] = &l.Items[i]
	}
	return out
}

// serviceImport is the host ServiceImport name, nil when there is none.
func (w *world) serviceImport(name string) *mcsv1beta1.ServiceImport {
	w.t.Helper()
	imp := &mcsv1beta1.ServiceImport{}
	if err := w.c.Get(w.t.Context(), key(name), imp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		w.t.Fatal(err)
	}
	return imp
}

// conditions are the host export name's conditions, by type, without
// their transition times.
func (w *world) conditions(name string) map[string]metav1.Condition {
	w.t.Helper()
	e := &mcsv1beta1.ServiceExport{}
	if err := w.c.Get(w.t.Context(), key(name), e); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]metav1.Condition{}
	for _, c := range e.Status.Conditions {
		c.LastTransitionTime = metav1.Time{}
		out[c.Type] = c
	}
	return out
}

// recorded are the Events recorded since the last call, as
// "<type> <reason>".
func (w *world) recorded() []string {
	var out []string
	for {
		select {
		case e := <-w.events.Events:
			f := strings.Fields(e)
			out = append(out, f[0]+" "+f[1])
		default:
			return out
		}
	}
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	if err := w.c.Create(w.t.Context(), obj); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) update(obj client.Object) {
	w.t.Helper()
	if err := w.c.Update(w.t.Context(), obj); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) get(obj client.Object) client.Object {
	w.t.Helper()
	if err := w.c.Get(w.t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		w.t.Fatal(err)
	}
	return obj
}

func cond(t mcsv1beta1.ServiceExportConditionType, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: status, Reason: reason, ObservedGeneration: 1}
}

// withoutMessages drops the messages of conds, for comparing the rest.
func withoutMessages(conds map[string]metav1.Condition) map[string]metav1.Condition {
	out := map[string]metav1.Condition{}
	for k, c := range conds {
		c.Message = ""
		out[k] = c
	}
	return out
}

func exported() map[string]metav1.Condition {
	return map[string]metav1.Condition{
		"Valid":    cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, "Valid"),
		"Conflict": cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, "NoConflicts"),
		"Ready":    cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, "Exported"),
	}
}

// twoClusters are the virtual nodes beijing and vk-shanghai (cluster
// shanghai) and a host node of its own.
func twoClusters() []client.Object {
	return []client.Object{
		builder.VirtualNode("beijing").Obj(),
		builder.VirtualNode("vk-shanghai").Label(wellknown.ClusterLabel, "shanghai").Obj(),
		builder.Node("host-1").Obj(),
	}
}

// webInTwoClusters is Service web, exported, with pods in beijing,
// shanghai, on a host node and on none.
func webInTwoClusters() []client.Object {
	return append(twoClusters(),
		makeService("web").Port("http", corev1.ProtocolTCP, 80).Obj(),
		makeNativeSlice("web-abc12", "web").Port("http", 8080).
			Endpoint("10.0.0.1", "beijing", true).Endpoint("10.0.0.2", "vk-shanghai", true).
			Endpoint("10.0.0.3", "host-1", true).Endpoint("10.0.0.4", "", true).Obj(),
		makeExport("web").Obj(),
	)
}

// TestExportSharesEachClustersEndpoints: exporting a Service with pods in
// two clusters gives one broker slice per cluster with exactly that
// cluster's endpoints, a ServiceImport with the Service's ports and both
// clusters, and an export that says it is exported; brokering again
// changes nothing.
func TestExportSharesEachClustersEndpoints(t *testing.T) {
	w := newWorld(t, webInTwoClusters()...)
	w.reconcile("web")

	got := w.brokerSlices("web")
	ports := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}}
	for cluster, ep := range map[string]discoveryv1.Endpoint{
		"beijing":  endpoint("10.0.0.1", "beijing", true),
		"shanghai": endpoint("10.0.0.2", "vk-shanghai", true),
	} {
		sl := got[cluster]
		if sl == nil {
			t.Fatalf("no broker slice for cluster %s; have %v", cluster, mapKeys(got))
		}
		if want := mcs.SliceName("web", cluster, "web-abc12"); sl.Name != want {
			t.Errorf("slice of %s is named %s, want %s", cluster, sl.Name, want)
		}
		wantLabels := mcs.SliceLabels("web", cluster, wellknown.BrokerManagedBy)
		wantLabels[wellknown.ManagedByLabel] = wellknown.ManagedByValue
		if diff := cmp.Diff(wantLabels, sl.Labels); diff != "" {
			t.Errorf("labels of %s's slice (-want +got):\n%s", cluster, diff)
		}
		if diff := cmp.Diff([]discoveryv1.Endpoint{ep}, sl.Endpoints); diff != "" {
			t.Errorf("endpoints of %s's slice (-want +got):\n%s", cluster, diff)
		}
		if diff := cmp.Diff(ports, sl.Ports); diff != "" {
			t.Errorf("ports of %s's slice (-want +got):\n%s", cluster, diff)
		}
		if sl.AddressType != discoveryv1.AddressTypeIPv4 {
			t.Errorf("address type of %s's slice = %s", cluster, sl.AddressType)
		}
		if len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].Kind != "Service" || sl.OwnerReferences[0].UID != "svc-web" {
			t.Errorf("owners of %s's slice = %+v, want Service web", cluster, sl.OwnerReferences)
		}
	}
	if len(got) != 2 {
		t.Errorf("broker slices for clusters %v, want beijing and shanghai", mapKeys(got))
	}

	imp := w.serviceImport("web")
	if imp == nil {
		t.Fatal("no ServiceImport")
	}
	wantSpec := mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, SessionAffinity: corev1.ServiceAffinityNone,
		Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}
	if diff := cmp.Diff(wantSpec, imp.Spec); diff != "" {
		t.Errorf("ServiceImport spec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]mcsv1beta1.ClusterStatus{{Cluster: "beijing"}, {Cluster: "shanghai"}}, imp.Status.Clusters); diff != "" {
		t.Errorf("ServiceImport clusters (-want +got):\n%s", diff)
	}
	if imp.Labels[wellknown.ManagedByLabel] != wellknown.ManagedByValue || imp.Annotations[wellknown.ImportConflictsAnnotation] != "" {
		t.Errorf("ServiceImport labels %v, annotations %v: want managed by flotilla, no conflicts", imp.Labels, imp.Annotations)
	}
	if diff := cmp.Diff(exported(), withoutMessages(w.conditions("web"))); diff != "" {
		t.Errorf("export conditions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Normal ServiceExported"}, w.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// Again: nothing is rewritten, nothing announced.
	versions := func() map[string]string {
		v := map[string]string{"import": w.serviceImport("web").ResourceVersion,
			"export": w.get(makeExport("web").Obj()).GetResourceVersion()}
		for c, sl := range w.brokerSlices("web") {
			v[c] = sl.ResourceVersion
		}
		return v
	}
	before := versions()
	w.reconcile("web")
	if diff := cmp.Diff(before, versions()); diff != "" {
		t.Errorf("a second reconcile rewrote objects (-before +after):\n%s", diff)
	}
	if ev := w.recorded(); len(ev) != 0 {
		t.Errorf("a second reconcile recorded %v", ev)
	}
}

// TestBrokerSlicesFollowTheHost: an endpoint turning unready in the host's
// slice turns unready in its cluster's broker slice; a cluster losing its
// last endpoint loses its slice.
func TestBrokerSlicesFollowTheHost(t *testing.T) {
	w := newWorld(t, webInTwoClusters()...)
	w.reconcile("web")
	native := w.get(makeNativeSlice("web-abc12", "web").Obj()).(*discoveryv1.EndpointSlice)
	native.Endpoints[0].Conditions.Ready = ptr.To(false)
	w.update(native)
	w.reconcile("web")
	if got := w.brokerSlices("web")["beijing"]; got == nil || len(got.Endpoints) != 1 || *got.Endpoints[0].Conditions.Ready {
		t.Errorf("beijing's broker slice after its endpoint turned unready: %+v", got)
	}

	native.Endpoints = native.Endpoints[:1]
	w.update(native)
	w.reconcile("web")
	if got := w.brokerSlices("web"); len(got) != 1 || got["beijing"] == nil {
		t.Errorf("broker slices after shanghai's endpoint left: %v, want beijing's only", mapKeys(got))
	}
	imp := w.serviceImport("web")
	if diff := cmp.Diff([]mcsv1beta1.ClusterStatus{{Cluster: "beijing"}}, imp.Status.Clusters); diff != "" {
		t.Errorf("ServiceImport clusters (-want +got):\n%s", diff)
	}
}

// TestExportDeleted: deleting the export takes its broker slices and the
// ServiceImport away.
func TestExportDeleted(t *testing.T) {
	w := newWorld(t, webInTwoClusters()...)
	w.reconcile("web")
	if err := w.c.Delete(t.Context(), makeExport("web").Obj()); err != nil {
		t.Fatal(err)
	}
	w.reconcile("web")
	if got := w.brokerSlices("web"); len(got) != 0 {
		t.Errorf("broker slices left for %v", mapKeys(got))
	}
	if imp := w.serviceImport("web"); imp != nil {
		t.Errorf("ServiceImport left: %+v", imp)
	}
}

// TestInvalidExport: an export of no Service, or of one that cannot be
// exported, says why in Valid and Ready, is announced once, and brokers
// nothing.
func TestInvalidExport(t *testing.T) {
	for name, tc := range map[string]struct {
		objs   []client.Object
		reason string
	}{
		"no Service": {
			objs:   []client.Object{makeExport("web").Obj()},
			reason: string(mcsv1beta1.ServiceExportReasonNoService),
		},
		"ExternalName": {
			objs:   []client.Object{makeExport("web").Obj(), makeService("web").ExternalName("example.com").Obj()},
			reason: string(mcsv1beta1.ServiceExportReasonInvalidServiceType),
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, append(twoClusters(), tc.objs...)...)
			w.reconcile("web")
			w.reconcile("web")
			conds := w.conditions("web")
			want := map[string]metav1.Condition{
				"Valid":    cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, tc.reason),
				"Conflict": cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, "NoConflicts"),
				"Ready":    cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, tc.reason),
			}
			if diff := cmp.Diff(want, withoutMessages(conds)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if !strings.Contains(conds["Valid"].Message, "shop/web") {
				t.Errorf("Valid message %q does not name the Service", conds["Valid"].Message)
			}
			if diff := cmp.Diff([]string{"Warning ServiceExportInvalid"}, w.recorded()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if imp := w.serviceImport("web"); imp != nil {
				t.Errorf("ServiceImport of an invalid export: %+v", imp)
			}
		})
	}
}

// TestConflicts: the host's export and members' relayed exports resolve by
// the KEP's rule (oldest wins); every export of a name whose exports
// disagree is in conflict, on the ServiceImport for member clusters and on
// the host export for the host.
func TestConflicts(t *testing.T) {
	http := mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}
	web := mcsv1beta1.ServicePort{Name: "web", Protocol: corev1.ProtocolTCP, Port: 80}
	headless := memberExport("beijing", t0, http)
	headless.Type = mcsv1beta1.Headless
	for name, tc := range map[string]struct {
		export    *mcsv1beta1.ServiceExport
		member    mcs.Export
		conflict  metav1.Condition
		conflicts map[string]mcsv1beta1.ServiceExportConditionReason
		spec      mcsv1beta1.ServiceImportSpec
		events    []string
	}{
		"a newer member export with another port name: both conflict, the host's port is kept": {
			export:   makeExport("web").Created(t0).Obj(),
			member:   memberExport("beijing", t1, web),
			conflict: cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonPortConflict)),
			conflicts: map[string]mcsv1beta1.ServiceExportConditionReason{
				"beijing": mcsv1beta1.ServiceExportReasonPortConflict, wellknown.HostClusterID: mcsv1beta1.ServiceExportReasonPortConflict},
			spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, SessionAffinity: corev1.ServiceAffinityNone,
				Ports: []mcsv1beta1.ServicePort{http}},
			events: []string{"Warning ServiceExportConflict", "Normal ServiceExported"},
		},
		"an older member export of another type wins over the host's": {
			export:   makeExport("web").Created(t1).Obj(),
			member:   headless,
			conflict: cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonTypeConflict)),
			conflicts: map[string]mcsv1beta1.ServiceExportConditionReason{
				"beijing": mcsv1beta1.ServiceExportReasonTypeConflict, wellknown.HostClusterID: mcsv1beta1.ServiceExportReasonTypeConflict},
			spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, SessionAffinity: corev1.ServiceAffinityNone,
				Ports: []mcsv1beta1.ServicePort{http}},
			events: []string{"Warning ServiceExportConflict", "Normal ServiceExported"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, append(twoClusters(), tc.export,
				makeService("web").Port("http", corev1.ProtocolTCP, 80).Obj(),
				makeRelayedSlice("web-beijing-relay", "web", "beijing", tc.member).Endpoint("10.1.0.1", "", true).Obj(),
			)...)
			w.reconcile("web")
			if diff := cmp.Diff(tc.conflict, withoutMessages(w.conditions("web"))["Conflict"]); diff != "" {
				t.Errorf("host export's Conflict (-want +got):\n%s", diff)
			}
			imp := w.serviceImport("web")
			if imp == nil {
				t.Fatal("no ServiceImport")
			}
			var conflicts map[string]mcs.Conflict
			if err := json.Unmarshal([]byte(imp.Annotations[wellknown.ImportConflictsAnnotation]), &conflicts); err != nil {
				t.Fatalf("conflicts annotation %q: %v", imp.Annotations[wellknown.ImportConflictsAnnotation], err)
			}
			reasons := map[string]mcsv1beta1.ServiceExportConditionReason{}
			for c, conflict := range conflicts {
				reasons[c] = conflict.Reason
			}
			if diff := cmp.Diff(tc.conflicts, reasons); diff != "" {
				t.Errorf("ServiceImport conflicts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.spec, imp.Spec); diff != "" {
				t.Errorf("ServiceImport spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]mcsv1beta1.ClusterStatus{{Cluster: "beijing"}}, imp.Status.Clusters); diff != "" {
				t.Errorf("ServiceImport clusters (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.events, w.recorded()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGlobalWithoutExport: a global Service gets broker slices but no
// ServiceImport; dropping the annotation drops the slices.
func TestGlobalWithoutExport(t *testing.T) {
	w := newWorld(t, append(twoClusters(),
		makeService("web").Port("http", corev1.ProtocolTCP, 80).Global().Obj(),
		makeNativeSlice("web-abc12", "web").Port("http", 8080).Endpoint("10.0.0.1", "beijing", true).Obj(),
	)...)
	w.reconcile("web")
	if got := w.brokerSlices("web"); len(got) != 1 || got["beijing"] == nil {
		t.Errorf("broker slices of a global Service: %v, want beijing's", mapKeys(got))
	}
	if imp := w.serviceImport("web"); imp != nil {
		t.Errorf("ServiceImport of a Service that is only global: %+v", imp)
	}
	svc := w.get(makeService("web").Obj()).(*corev1.Service)
	svc.Annotations = nil
	w.update(svc)
	w.reconcile("web")
	if got := w.brokerSlices("web"); len(got) != 0 {
		t.Errorf("broker slices after the Service stopped being global: %v", mapKeys(got))
	}
}

// TestClustersThatCannotImport: a virtual node that maps namespaces to
// others, or whose member does not serve the ServiceImport API, keeps the
// export from Ready and is named in it.
func TestClustersThatCannotImport(t *testing.T) {
	for name, tc := range map[string]struct {
		node   *corev1.Node
		ready  metav1.Condition
		saying []string
	}{
		"Suffix namespace mapping": {
			node:   builder.VirtualNode("ke-beijing").Annotation(wellknown.NamespaceMappingAnnotation, "Suffix").Obj(),
			ready:  cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, wellknown.ReasonNamespaceNotSame),
			saying: []string{"ke-beijing", "shop-ke-beijing"},
		},
		"SameName namespace mapping": {
			node:  builder.VirtualNode("beijing").Annotation(wellknown.NamespaceMappingAnnotation, "SameName").Obj(),
			ready: cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, "Exported"),
		},
		"member without the ServiceImport API": {
			node:   builder.VirtualNode("old").Annotation(wellknown.MultiClusterServicesAnnotation, "ServiceImport CRD not installed").Obj(),
			ready:  cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, wellknown.ReasonImportUnavailable),
			saying: []string{"old", `"ServiceImport CRD not installed"`},
		},
		"member serving the ServiceImport API": {
			node:  builder.VirtualNode("beijing").Annotation(wellknown.MultiClusterServicesAnnotation, "v1beta1").Obj(),
			ready: cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, "Exported"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.node, makeService("web").Port("http", corev1.ProtocolTCP, 80).Obj(), makeExport("web").Obj())
			w.reconcile("web")
			got := w.conditions("web")["Ready"]
			msg := got.Message
			got.Message = ""
			if diff := cmp.Diff(tc.ready, got); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			for _, s := range tc.saying {
				if !strings.Contains(msg, s) {
					t.Errorf("Ready message %q does not say %s", msg, s)
				}
			}
			if w.serviceImport("web") == nil {
				t.Error("no ServiceImport: the clusters that can import it should")
			}
		})
	}
}

// TestMemberOnlyExport: a member's export without a host Service still
// makes the ServiceImport, which goes with the member's last relayed slice.
func TestMemberOnlyExport(t *testing.T) {
	http := mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}
	relayed := makeRelayedSlice("web-beijing-relay", "web", "beijing", memberExport("beijing", t0, http)).Obj()
	w := newWorld(t, append(twoClusters(), relayed)...)
	w.reconcile("web")
	imp := w.serviceImport("web")
	if imp == nil {
		t.Fatal("no ServiceImport for a member's export")
	}
	if diff := cmp.Diff([]mcsv1beta1.ServicePort{http}, imp.Spec.Ports); diff != "" {
		t.Errorf("ServiceImport ports (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]mcsv1beta1.ClusterStatus{{Cluster: "beijing"}}, imp.Status.Clusters); diff != "" {
		t.Errorf("ServiceImport clusters (-want +got):\n%s", diff)
	}
	if err := w.c.Delete(t.Context(), relayed); err != nil {
		t.Fatal(err)
	}
	w.reconcile("web")
	if imp := w.serviceImport("web"); imp != nil {
		t.Errorf("ServiceImport left after the member's export went: %+v", imp)
	}
}

// TestUnreadableRelayedExport: a relayed slice whose export record cannot
// be read exports nothing, and a member cannot speak for the host.
func TestUnreadableRelayedExport(t *testing.T) {
	bad := makeRelayedSlice("web-beijing-relay", "web", "beijing", memberExport("beijing", t0)).Obj()
	bad.Annotations[wellknown.ExportAnnotation] = "{"
	impostor := makeRelayedSlice("web-host-relay", "web", wellknown.HostClusterID, memberExport(wellknown.HostClusterID, t0)).Obj()
	w := newWorld(t, bad, impostor)
	w.reconcile("web")
	if imp := w.serviceImport("web"); imp != nil {
		t.Errorf("ServiceImport from unreadable or impostor exports: %+v", imp)
	}
}

// TestForeignServiceImportKept: a ServiceImport flotilla did not write is
// neither rewritten nor deleted.
func TestForeignServiceImportKept(t *testing.T) {
	foreign := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: testNamespace},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{}},
	}
	w := newWorld(t, append(webInTwoClusters(), foreign)...)
	w.reconcile("web")
	if imp := w.serviceImport("web"); imp == nil || imp.Spec.Type != mcsv1beta1.Headless {
		t.Errorf("foreign ServiceImport changed: %+v", imp)
	}
	if err := w.c.Delete(t.Context(), makeExport("web").Obj()); err != nil {
		t.Fatal(err)
	}
	w.reconcile("web")
	if w.serviceImport("web") == nil {
		t.Error("foreign ServiceImport deleted")
	}
}

// TestExportConditionsObserveTheGeneration: the conditions carry the
// export's generation.
func TestExportConditionsObserveTheGeneration(t *testing.T) {
	export := makeExport("web").Obj()
	export.Generation = 3
	w := newWorld(t, append(twoClusters(), makeService("web").Obj(), export)...)
	w.reconcile("web")
	for typ, c := range w.conditions("web") {
		if c.ObservedGeneration != 3 {
			t.Errorf("%s observed generation %d, want 3", typ, c.ObservedGeneration)
		}
	}
	if meta.FindStatusCondition(w.get(export).(*mcsv1beta1.ServiceExport).Status.Conditions, "Ready").LastTransitionTime.IsZero() {
		t.Error("Ready has no transition time")
	}
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestEventsOnlyOnTransitions: a condition whose message changes but whose
// state does not is rewritten without a new Event; leaving and coming back
// to Ready is announced again.
func TestEventsOnlyOnTransitions(t *testing.T) {
	member := makeRelayedSlice("web-beijing-relay", "web", "beijing", func() mcs.Export {
		e := memberExport("beijing", t0, mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80})
		e.Type = mcsv1beta1.Headless
		return e
	}()).Obj()
	w := newWorld(t, append(twoClusters(), member, makeExport("web").Created(t1).Obj(),
		makeService("web").Port("http", corev1.ProtocolTCP, 80).Obj())...)
	w.reconcile("web")
	if diff := cmp.Diff([]string{"Warning ServiceExportConflict", "Normal ServiceExported"}, w.recorded()); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}

	// Another cluster in the same conflict: a new message, no new Event.
	shanghai := memberExport("shanghai", t1, mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80})
	w.create(makeRelayedSlice("web-shanghai-relay", "web", "shanghai", shanghai).Obj())
	before := w.conditions("web")["Conflict"].Message
	w.reconcile("web")
	if after := w.conditions("web")["Conflict"].Message; after == before {
		t.Errorf("Conflict message stayed %q after the conflict changed", after)
	}
	if ev := w.recorded(); len(ev) != 0 {
		t.Errorf("events for a conflict that only changed its message: %v", ev)
	}

	// Ready leaves and comes back: announced again.
	node := w.get(builder.VirtualNode("beijing").Obj()).(*corev1.Node)
	node.Annotations = map[string]string{wellknown.NamespaceMappingAnnotation: "Suffix"}
	w.update(node)
	w.reconcile("web")
	node.Annotations = nil
	w.update(node)
	w.reconcile("web")
	if diff := cmp.Diff([]string{"Normal ServiceExported"}, w.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestRelayedSliceNamesItsCluster: the relayed slice's cluster label, not
// the record it carries, says whose export it is.
func TestRelayedSliceNamesItsCluster(t *testing.T) {
	w := newWorld(t, makeRelayedSlice("web-beijing-relay", "web", "beijing", memberExport("shanghai", t0)).Obj())
	w.reconcile("web")
	imp := w.serviceImport("web")
	if imp == nil {
		t.Fatal("no ServiceImport")
	}
	if diff := cmp.Diff([]mcsv1beta1.ClusterStatus{{Cluster: "beijing"}}, imp.Status.Clusters); diff != "" {
		t.Errorf("ServiceImport clusters (-want +got):\n%s", diff)
	}
}

// TestWriteErrors: a write refused because the cache was stale is left to
// the event that follows; a write the apiserver refuses as invalid is not
// retried; any other failure is.
func TestWriteErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}
	for name, tc := range map[string]struct {
		err      error
		wantErr  bool
		terminal bool
	}{
		"conflict":    {err: apierrors.NewConflict(gr, "x", errors.New("changed")), wantErr: false},
		"invalid":     {err: apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "EndpointSlice"}, "x", nil), wantErr: true, terminal: true},
		"unavailable": {err: apierrors.NewServiceUnavailable("busy"), wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, webInTwoClusters()...)
			w.r.client = interceptor.NewClient(w.c.(client.WithWatch), interceptor.Funcs{
				Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return tc.err },
			})
			_, err := w.r.Reconcile(t.Context(), reconcile.Request{NamespacedName: key("web")})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile = %v, want an error: %v", err, tc.wantErr)
			}
			if got := errors.Is(err, reconcile.TerminalError(nil)); got != tc.terminal {
				t.Errorf("Reconcile = %v: terminal %v, want %v", err, got, tc.terminal)
			}
		})
	}
}

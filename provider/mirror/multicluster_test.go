// Tests of the Multi-Cluster Services mirrors: imports, global Services and
// the relay of a member's own exports, against fake apiservers.

package mirror

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	"flotilla.io/flotilla/internal/kube/kubetest"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
)

// mcsWorld is a world whose host and member serve the Multi-Cluster
// Services API, with the member's Service cluster IPs allocated as an
// apiserver would.
type mcsWorld struct {
	*world
	hostMCS, memberMCS *mcsfake.Clientset
}

func newMCSWorld(t *testing.T, memberObjs ...runtime.Object) *mcsWorld {
	t.Helper()
	w := &mcsWorld{hostMCS: mcsfake.NewSimpleClientset(), memberMCS: mcsfake.NewSimpleClientset()}
	w.world = newWorldWith(t, func(cfg *Config) {
		cfg.MultiCluster = &MultiCluster{
			Member: w.memberMCS, Host: mcsinformers.NewSharedInformerFactory(w.hostMCS, 0),
			MemberInformers: mcsinformers.NewSharedInformerFactory(w.memberMCS, 0),
			RelayExports:    true, HostNamespaces: cfg.HostClient,
		}
	})
	for _, o := range memberObjs {
		if err := w.member.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	ip := 0
	kubetest.PrependReactor(&w.member.Fake, "create", "services", func(a ktesting.Action) (bool, runtime.Object, error) {
		s := a.(ktesting.CreateAction).GetObject().(*corev1.Service)
		if s.Spec.ClusterIP == "" {
			ip++
			s.Spec.ClusterIP = fmt.Sprintf("10.96.0.%d", ip)
			s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
		}
		return false, nil, nil
	})
	return w
}

// start runs the informers and the mirrors.
func (w *mcsWorld) start() {
	w.hostInformers.Start(w.ctx.Done())
	w.memberInformers.Start(w.ctx.Done())
	w.cfg.MultiCluster.Host.Start(w.ctx.Done())
	w.cfg.MultiCluster.MemberInformers.Start(w.ctx.Done())
	go w.m.Run(w.ctx)
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func hostImport(name string, t mcsv1beta1.ServiceImportType, clusters ...string) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, Labels: map[string]string{"exported": "yes"}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: t, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	for _, c := range clusters {
		si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: c})
	}
	return si
}

// brokerSlice is a host slice of service's endpoints in cluster, as the
// broker derives it.
func brokerSlice(service, cluster string, ready map[string]bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: mcs.SliceName(service, cluster, service+"-abcde"),
			Labels: mcs.SliceLabels(service, cluster, wellknown.BrokerManagedBy)},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	ips := make([]string, 0, len(ready))
	for ip := range ready {
		ips = append(ips, ip)
	}
	slices.Sort(ips)
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(cluster),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready[ip])},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: testNamespace, Name: "p-" + ip}})
	}
	return s
}

// memberSlicesOf lists the member's slices labelled key=value.
func (w *mcsWorld) memberSlicesOf(key, value string) []discoveryv1.EndpointSlice {
	l, err := w.member.DiscoveryV1().EndpointSlices(testNamespace).List(w.ctx, metav1.ListOptions{LabelSelector: key + "=" + value})
	must(w.t, err)
	return l.Items
}

// readyIn is the ready addresses of slices, sorted.
func readyIn(slices []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				out = append(out, ep.Addresses...)
			}
		}
	}
	slicesSort(out)
	return out
}

func slicesSort(s []string) { slices.Sort(s) }

// TestImportFollowsTheHost: a host ServiceImport becomes a member
// ServiceImport with a clusterset IP of the member's own, the MCS slices
// of every source cluster, and a derived Service with the same endpoints;
// a readiness change and the import's removal follow.
func TestImportFollowsTheHost(t *testing.T) {
	w := newMCSWorld(t, namespace(testNamespace))
	_, err := w.hostMCS.MulticlusterV1beta1().ServiceImports(testNamespace).Create(w.ctx, hostImport("web", mcsv1beta1.ClusterSetIP, "a", "b"), metav1.CreateOptions{})
	must(t, err)
	for _, s := range []*discoveryv1.EndpointSlice{
		brokerSlice("web", "a", map[string]bool{"10.1.0.1": true, "10.1.0.2": true}),
		brokerSlice("web", "b", map[string]bool{"10.2.0.1": true}),
	} {
		_, err := w.host.DiscoveryV1().EndpointSlices(testNamespace).Create(w.ctx, s, metav1.CreateOptions{})
		must(t, err)
	}
	w.start()

	derived := mcs.DerivedServiceName(testNamespace, "web")
	w.eventually("member ServiceImport with the derived Service's IP", func() bool {
		si, err := w.memberMCS.MulticlusterV1beta1().ServiceImports(testNamespace).Get(w.ctx, "web", metav1.GetOptions{})
		if err != nil || len(si.Spec.IPs) != 1 || len(si.Status.Clusters) != 2 {
			return false
		}
		svc, err := w.member.CoreV1().Services(testNamespace).Get(w.ctx, derived, metav1.GetOptions{})
		return err == nil && si.Spec.IPs[0] == svc.Spec.ClusterIP && si.Labels["exported"] == "yes" &&
			si.Spec.Type == mcsv1beta1.ClusterSetIP && len(si.Spec.Ports) == 1 && len(svc.Spec.Selector) == 0
	})
	all := []string{"10.1.0.1", "10.1.0.2", "10.2.0.1"}
	w.eventually("MCS slices of both clusters", func() bool {
		got := w.memberSlicesOf(mcsv1beta1.LabelServiceName, "web")
		return slices.Equal(readyIn(got), all) && len(got) == 2
	})
	for _, s := range w.memberSlicesOf(mcsv1beta1.LabelServiceName, "web") {
		if s.Labels[discoveryv1.LabelServiceName] != "" || s.Labels[discoveryv1.LabelManagedBy] != wellknown.RelayManagedBy {
			t.Errorf("MCS slice %s labels = %v", s.Name, s.Labels)
		}
		for _, ep := range s.Endpoints {
			if ep.NodeName != nil || ep.TargetRef != nil {
				t.Errorf("MCS slice %s names host objects: %+v", s.Name, ep)
			}
		}
	}
	w.eventually("the derived Service's slices carry every cluster", func() bool {
		return slices.Equal(readyIn(w.memberSlicesOf(discoveryv1.LabelServiceName, derived)), all)
	})

	unready := brokerSlice("web", "a", map[string]bool{"10.1.0.1": true, "10.1.0.2": false})
	cur, err := w.host.DiscoveryV1().EndpointSlices(testNamespace).Get(w.ctx, unready.Name, metav1.GetOptions{})
	must(t, err)
	unready.ResourceVersion = cur.ResourceVersion
	_, err = w.host.DiscoveryV1().EndpointSlices(testNamespace).Update(w.ctx, unready, metav1.UpdateOptions{})
	must(t, err)
	w.eventually("the unready endpoint leaves the ready set", func() bool {
		return slices.Equal(readyIn(w.memberSlicesOf(mcsv1beta1.LabelServiceName, "web")), []string{"10.1.0.1", "10.2.0.1"}) &&
			slices.Equal(readyIn(w.memberSlicesOf(discoveryv1.LabelServiceName, derived)), []string{"10.1.0.1", "10.2.0.1"})
	})

	must(t, w.hostMCS.MulticlusterV1beta1().ServiceImports(testNamespace).Delete(w.ctx, "web", metav1.DeleteOptions{}))
	w.eventually("import, derived Service and their slices removed", func() bool {
		_, errSI := w.memberMCS.MulticlusterV1beta1().ServiceImports(testNamespace).Get(w.ctx, "web", metav1.GetOptions{})
		_, errSvc := w.member.CoreV1().Services(testNamespace).Get(w.ctx, derived, metav1.GetOptions{})
		return apierrors.IsNotFound(errSI) && apierrors.IsNotFound(errSvc) &&
			len(w.memberSlicesOf(mcsv1beta1.LabelServiceName, "web")) == 0 && len(w.memberSlicesOf(discoveryv1.LabelServiceName, derived)) == 0
	})
}

// TestImportWaitsForTheNamespace: the import of a namespace the host has
// only because a member exported from it waits for the member to have the
// namespace (flotilla never creates it, nor recreates one its users are
// deleting); it is imported once the namespace appears.
func TestImportWaitsForTheNamespace(t *testing.T) {
	w := newMCSWorld(t)
	hostNS, err := w.host.CoreV1().Namespaces().Get(w.ctx, testNamespace, metav1.GetOptions{})
	must(t, err)
	hostNS.Annotations = map[string]string{wellknown.ExportedFromAnnotation: "other"}
	_, err = w.host.CoreV1().Namespaces().Update(w.ctx, hostNS, metav1.UpdateOptions{})
	must(t, err)
	_, err = w.hostMCS.MulticlusterV1beta1().ServiceImports(testNamespace).Create(w.ctx, hostImport("db", mcsv1beta1.Headless, "a"), metav1.CreateOptions{})
	must(t, err)
	w.start()
	w.never("a namespace or import appears", 300*time.Millisecond, func() bool {
		_, errNS := w.member.CoreV1().Namespaces().Get(w.ctx, testNamespace, metav1.GetOptions{})
		_, errSI := w.memberMCS.MulticlusterV1beta1().ServiceImports(testNamespace).Get(w.ctx, "db", metav1.GetOptions{})
		return errNS == nil || errSI == nil
	})
	_, err = w.member.CoreV1().Namespaces().Create(w.ctx, namespace(testNamespace), metav1.CreateOptions{})
	must(t, err)
	w.eventually("the headless import, without IPs or derived Service", func() bool {
		si, err := w.memberMCS.MulticlusterV1beta1().ServiceImports(testNamespace).Get(w.ctx, "db", metav1.GetOptions{})
		_, errSvc := w.member.CoreV1().Services(testNamespace).Get(w.ctx, mcs.DerivedServiceName(testNamespace, "db"), metav1.GetOptions{})
		return err == nil && si.Spec.Type == mcsv1beta1.Headless && len(si.Spec.IPs) == 0 && apierrors.IsNotFound(errSvc)
	})
}

// TestImportCreatesTheUsersNamespace: a member without the namespace of an
// export made in the host (a cluster without replicas) gets it, as
// forwarded pods would, and the import.
func TestImportCreatesTheUsersNamespace(t *testing.T) {
	w := newMCSWorld(t)
	_, err := w.hostMCS.MulticlusterV1beta1().ServiceImports(testNamespace).Create(w.ctx, hostImport("web", mcsv1beta1.ClusterSetIP, "a"), metav1.CreateOptions{})
	must(t, err)
	w.start()
	w.eventually("namespace and import", func() bool {
		ns, errNS := w.member.CoreV1().Namespaces().Get(w.ctx, testNamespace, metav1.GetOptions{})
		_, errSI := w.memberMCS.MulticlusterV1beta1().ServiceImports(testNamespace).Get(w.ctx, "web", metav1.GetOptions{})
		return errNS == nil && w.cfg.Owner().Owns(ns) && errSI == nil
	})
}

// TestGlobalServiceCarriesTheOtherClusters: a global Service is mirrored
// into a member without its pods, and its mirror gets the other clusters'
// endpoints (its own come from the member's controller).
func TestGlobalServiceCarriesTheOtherClusters(t *testing.T) {
	w := newMCSWorld(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "web",
		Annotations: map[string]string{wellknown.GlobalAnnotation: "true"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}},
			TrafficDistribution: ptr.To(corev1.ServiceTrafficDistributionPreferSameZone)}}
	_, err := w.host.CoreV1().Services(testNamespace).Create(w.ctx, svc, metav1.CreateOptions{})
	must(t, err)
	for _, s := range []*discoveryv1.EndpointSlice{
		brokerSlice("web", testNode, map[string]bool{"10.1.0.1": true}),
		brokerSlice("web", "other", map[string]bool{"10.2.0.1": true, "10.2.0.2": true}),
	} {
		_, err := w.host.DiscoveryV1().EndpointSlices(testNamespace).Create(w.ctx, s, metav1.CreateOptions{})
		must(t, err)
	}
	w.start()
	w.eventually("the mirror, with the other cluster's endpoints only", func() bool {
		_, err := w.member.CoreV1().Services(testNamespace).Get(w.ctx, "web", metav1.GetOptions{})
		got := w.memberSlicesOf(discoveryv1.LabelServiceName, "web")
		return err == nil && slices.Equal(readyIn(got), []string{"10.2.0.1", "10.2.0.2"})
	})
	// Preferring the member's own zone: the other cluster's endpoints
	// are hinted with a zone no member node is in.
	for _, s := range w.memberSlicesOf(discoveryv1.LabelServiceName, "web") {
		for _, ep := range s.Endpoints {
			if ep.Hints == nil || len(ep.Hints.ForZones) != 1 || ep.Hints.ForZones[0].Name != remoteZone("other") {
				t.Errorf("endpoint %v of another cluster has hints %+v", ep.Addresses, ep.Hints)
			}
		}
	}
	// No longer global: the other clusters' endpoints go.
	cur, err := w.host.CoreV1().Services(testNamespace).Get(w.ctx, "web", metav1.GetOptions{})
	must(t, err)
	cur.Annotations = nil
	_, err = w.host.CoreV1().Services(testNamespace).Update(w.ctx, cur, metav1.UpdateOptions{})
	must(t, err)
	w.eventually("the other cluster's endpoints removed", func() bool {
		return len(w.memberSlicesOf(discoveryv1.LabelServiceName, "web")) == 0
	})
}

// TestRelayMemberExport: a member's own export is relayed to the host as
// slices carrying the export, written as the node; its conditions say it
// is valid and what the broker found in conflict; its removal removes the
// relay. An ExternalName Service is refused, and nothing is relayed.
func TestRelayMemberExport(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.1.1", Ports: []corev1.ServicePort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
	native := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-x1y2z",
			Labels: map[string]string{discoveryv1.LabelServiceName: "db", discoveryv1.LabelManagedBy: endpointSliceController}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.5.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	w := newMCSWorld(t, namespace("shop"), svc, native)
	w.start()
	_, err := w.memberMCS.MulticlusterV1beta1().ServiceExports("shop").Create(w.ctx,
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}}, metav1.CreateOptions{})
	must(t, err)

	relayed := func() []discoveryv1.EndpointSlice {
		l, err := w.host.DiscoveryV1().EndpointSlices("shop").List(w.ctx, metav1.ListOptions{})
		must(t, err)
		return l.Items
	}

	w.eventually("the export relayed into a host namespace made for it", func() bool {
		ns, err := w.host.CoreV1().Namespaces().Get(w.ctx, "shop", metav1.GetOptions{})
		got := relayed()
		if err != nil || ns.Labels[wellknown.ManagedByLabel] != wellknown.ManagedByValue || len(got) != 1 {
			return false
		}
		e, err := mcs.DecodeExport(got[0].Annotations[wellknown.ExportAnnotation])
		l := got[0].Labels
		return err == nil && e.Cluster == testNode && e.Type == mcsv1beta1.ClusterSetIP && len(e.Ports) == 1 &&
			l[mcsv1beta1.LabelSourceCluster] == testNode && l[discoveryv1.LabelManagedBy] == wellknown.RelayManagedBy &&
			l[wellknown.ClusterLabel] == testNode && slices.Equal(readyIn(got), []string{"10.5.0.9"})
	})
	exportCondition := func(t mcsv1beta1.ServiceExportConditionType) *metav1.Condition {
		se, err := w.memberMCS.MulticlusterV1beta1().ServiceExports("shop").Get(w.ctx, "db", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return meta.FindStatusCondition(se.Status.Conditions, string(t))
	}
	w.eventually("Valid and no conflict", func() bool {
		v, c := exportCondition(mcsv1beta1.ServiceExportConditionValid), exportCondition(mcsv1beta1.ServiceExportConditionConflict)
		return v != nil && v.Status == metav1.ConditionTrue && c != nil && c.Status == metav1.ConditionFalse
	})

	// The broker found this export in conflict.
	conflicts, _ := json.Marshal(map[string]mcs.Conflict{testNode: {Reason: mcsv1beta1.ServiceExportReasonPortConflict, Message: "ports differ"}})
	si := hostImport("db", mcsv1beta1.ClusterSetIP, testNode)
	si.Namespace = "shop"
	si.Annotations = map[string]string{wellknown.ImportConflictsAnnotation: string(conflicts)}
	_, err = w.hostMCS.MulticlusterV1beta1().ServiceImports("shop").Create(w.ctx, si, metav1.CreateOptions{})
	must(t, err)
	w.eventually("Conflict True from the broker", func() bool {
		c := exportCondition(mcsv1beta1.ServiceExportConditionConflict)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == string(mcsv1beta1.ServiceExportReasonPortConflict)
	})

	// An ExternalName Service cannot be exported: nothing is relayed.
	ext := svc.DeepCopy()
	ext.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}
	_, err = w.member.CoreV1().Services("shop").Update(w.ctx, ext, metav1.UpdateOptions{})
	must(t, err)
	w.eventually("Valid False, relay removed", func() bool {
		v := exportCondition(mcsv1beta1.ServiceExportConditionValid)
		return v != nil && v.Status == metav1.ConditionFalse && v.Reason == string(mcsv1beta1.ServiceExportReasonInvalidServiceType) && len(relayed()) == 0
	})
	_, err = w.member.CoreV1().Services("shop").Update(w.ctx, svc, metav1.UpdateOptions{})
	must(t, err)
	w.eventually("relayed again", func() bool { return len(relayed()) == 1 })
	must(t, w.memberMCS.MulticlusterV1beta1().ServiceExports("shop").Delete(w.ctx, "db", metav1.DeleteOptions{}))
	w.eventually("relay removed with the export", func() bool { return len(relayed()) == 0 })
}

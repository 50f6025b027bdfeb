package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
)

// webService is host Service shop/web, port http 80 to 8080, with the
// annotations given as key, value pairs.
func webService(annotations ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "web", Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}}}
	for i := 0; i+1 < len(annotations); i += 2 {
		s.Annotations[annotations[i]] = annotations[i+1]
	}
	return s
}

// ep is an endpoint of pod at addr on node; state is ready, terminating
// (neither ready nor serving), or empty (conditions unknown).
func ep(addr, pod, node, state string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr.To(node),
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: testNS, Name: pod}}
	switch state {
	case "ready":
		e.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
	case "terminating":
		e.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}
	}
	return e
}

// slice is an EndpointSlice of shop named name with labels and endpoints.
func slice(name string, labels map[string]string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
}

// brokerSlice is the broker's slice of web's forwarded pods in cluster.
func brokerSlice(cluster string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return slice(mcs.SliceName("web", cluster, "web-abcde"), mcs.SliceLabels("web", cluster, wellknown.BrokerManagedBy), eps...)
}

// relayedSlice is the slice flotilla-node relays from cluster's own export
// of web.
func relayedSlice(cluster string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := slice(mcs.SliceName("web", cluster, "web-member"), mcs.SliceLabels("web", cluster, wellknown.RelayManagedBy), eps...)
	s.Annotations = map[string]string{wellknown.ExportAnnotation: mcs.ExportOf(cluster, &mcsv1beta1.ServiceExport{}, webService()).Encode()}
	return s
}

// hostSlice is the host's own slice of web, as its endpointslice
// controller writes it.
func hostSlice(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return slice("web-abcde", map[string]string{discoveryv1.LabelServiceName: "web",
		discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}, eps...)
}

func cond(t mcsv1beta1.ServiceExportConditionType, status metav1.ConditionStatus, reason mcsv1beta1.ServiceExportConditionReason, msg string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: status, Reason: string(reason), Message: msg, ObservedGeneration: 1}
}

func serviceExport(conds ...metav1.Condition) *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "web", Generation: 1},
		Status: mcsv1beta1.ServiceExportStatus{Conditions: conds}}
}

// serviceImport is the broker's import of web, in clusters, with the
// conflicts annotation when conflicts is not empty.
func serviceImport(conflicts string, clusters ...string) *mcsv1beta1.ServiceImport {
	i := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP,
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	for _, c := range clusters {
		i.Status.Clusters = append(i.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: c})
	}
	if conflicts != "" {
		i.Annotations = map[string]string{wellknown.ImportConflictsAnnotation: conflicts}
	}
	return i
}

// mcsServedBy makes c's discovery say the host serves ServiceExport and
// ServiceImport, as it does once their CRDs are installed.
func mcsServedBy(c *fake.Clientset) {
	c.Resources = []*metav1.APIResourceList{{GroupVersion: mcsv1beta1.GroupVersion.String(), APIResources: []metav1.APIResource{
		{Name: "serviceexports", Namespaced: true, Kind: "ServiceExport"},
		{Name: "serviceimports", Namespaced: true, Kind: "ServiceImport"}}}}
}

// TestExplainService: explain service/NAME says whether the fleet sees a
// Service, what the broker made of it, where its endpoints are and which
// members can import it, in the lines a user reads.
func TestExplainService(t *testing.T) {
	beijing := builder.VirtualNode("beijing").Obj()
	hangzhou := builder.VirtualNode("hangzhou").Obj()
	edge := builder.VirtualNode("ke-edge").Annotation(wellknown.NamespaceMappingAnnotation, "Suffix").Obj()
	old := builder.VirtualNode("old").Annotation(wellknown.MultiClusterServicesAnnotation, "the member serves no ServiceImport API").Obj()
	hostNode := builder.Node("control-plane").Obj()
	valid := cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, mcsv1beta1.ServiceExportReasonValid, "")
	noConflict := cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, mcsv1beta1.ServiceExportReasonNoConflicts, "")
	notSame := cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, wellknown.ReasonNamespaceNotSame,
		"virtual node ke-edge maps namespace shop to shop-ke-edge, which breaks namespace sameness; not imported there")
	exported := cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, mcsv1beta1.ServiceExportReasonExported, "")
	const portConflict = `port 80 is "web"/TCP but "http"/TCP in cluster host; the oldest export, in cluster host, is used`

	cases := map[string]struct {
		host      []runtime.Object
		mcs       []runtime.Object
		crdsGone  bool
		verdict   string
		lines     []string
		notInText []string
	}{
		"exported, endpoints in two clusters, a Suffix node": {
			host: []runtime.Object{beijing, hangzhou, edge, hostNode, webService(),
				brokerSlice("beijing", ep("10.0.1.5", "web-1", "beijing", "ready"), ep("10.0.1.6", "web-2", "beijing", "terminating")),
				relayedSlice("hangzhou", ep("10.1.0.7", "web-x", "hangzhou-node-1", "ready")),
				hostSlice(ep("10.0.1.5", "web-1", "beijing", "ready"))},
			mcs:     []runtime.Object{serviceExport(valid, notSame, noConflict), serviceImport("", "beijing", "hangzhou")},
			verdict: "Exported: imported by 2 of 3 clusters (not ke-edge); 2 ready endpoints in beijing, hangzhou",
			lines: []string{
				"Type: ClusterIP 10.96.0.10",
				"Ports: http 80/TCP -> 8080",
				"Global: no",
				"ServiceExport: shop/web",
				"Valid: True, Valid",
				"Ready: False, NamespaceNotSame: virtual node ke-edge maps namespace shop to shop-ke-edge, which breaks namespace sameness; not imported there",
				"Conflict: False, NoConflicts",
				"ServiceImport: shop/web, ClusterSetIP",
				"Ports: http 80/TCP",
				"Clusters: beijing, hangzhou",
				"Member exports: hangzhou",
				"Endpoints, from the broker's and relayed slices (multicluster.kubernetes.io/service-name=web)",
				"CLUSTER ADDRESSES READY SERVING TERMINATING HOSTNAME POD FROM",
				"beijing 10.0.1.5 true true false - web-1 forwarded pod",
				"beijing 10.0.1.6 false false true - web-2 forwarded pod",
				"hangzhou 10.1.0.7 true true false - web-x member export",
				"Import by cluster",
				"beijing: yes",
				"hangzhou: yes",
				"ke-edge: no, NamespaceNotSame: maps shop to shop-ke-edge, breaking MCS namespace sameness; global mode still mirrors it under that name",
			},
			notInText: []string{"host slice", "control-plane", "mirror is", "In conflict"},
		},
		"global": {
			host: []runtime.Object{beijing, hangzhou, edge, webService(wellknown.GlobalAnnotation, "true"),
				brokerSlice("beijing", ep("10.0.1.5", "web-1", "beijing", "ready")),
				brokerSlice("hangzhou", ep("10.1.0.5", "web-2", "hangzhou", ""))},
			verdict: "Global: mirrored into every cluster; 2 ready endpoints in beijing, hangzhou",
			lines: []string{
				`Global: yes (flotilla.io/global: "true"): mirrored into every cluster with every cluster's endpoints`,
				"ServiceExport: none: not exported from the host",
				"ServiceImport: none: the broker makes one for a valid export",
				"beijing 10.0.1.5 true true false - web-1 forwarded pod",
				"hangzhou 10.1.0.5 true true false - web-2 forwarded pod",
				"Import by cluster, once exported",
				"beijing: yes; its global mirror is shop/web with the endpoints of hangzhou",
				"hangzhou: yes; its global mirror is shop/web with the endpoints of beijing",
				"ke-edge: no, NamespaceNotSame: maps shop to shop-ke-edge, breaking MCS namespace sameness; global mode still mirrors it under that name: shop-ke-edge/web with the endpoints of beijing, hangzhou",
			},
		},
		"neither exported nor global": {
			host: []runtime.Object{beijing, old, hostNode, webService(),
				hostSlice(ep("10.0.1.5", "web-1", "beijing", "ready"), ep("10.0.9.9", "web-h", "control-plane", "ready")),
				// left over from an earlier export: not what the Service has now
				brokerSlice("hangzhou", ep("10.1.0.5", "web-2", "hangzhou", "ready"))},
			verdict: "Neither exported nor global, a member sees only its own endpoints: 2 ready endpoints in beijing, host node control-plane",
			lines: []string{
				"ServiceExport: none: not exported from the host",
				"Endpoints, from the host's own slices (kubernetes.io/service-name=web)",
				"beijing 10.0.1.5 true true false - web-1 host slice",
				"host node control-plane 10.0.9.9 true true false - web-h host slice",
				"beijing: yes",
				`old: no, ImportUnavailable: its member does not serve ServiceImport v1beta1: "the member serves no ServiceImport API"`,
			},
			notInText: []string{"hangzhou", "forwarded pod"},
		},
		"conflicting member export": {
			host: []runtime.Object{beijing, hangzhou, webService(),
				brokerSlice("beijing", ep("10.0.1.5", "web-1", "beijing", "ready")),
				relayedSlice("hangzhou")},
			mcs: []runtime.Object{serviceExport(valid, exported, noConflict),
				serviceImport(`{"hangzhou":{"reason":"PortConflict","message":"`+strings.ReplaceAll(portConflict, `"`, `\"`)+`"}}`, "beijing", "hangzhou")},
			verdict: "Exported: imported by 2 of 2 clusters; 1 ready endpoint in beijing; in conflict: hangzhou (PortConflict)",
			lines: []string{
				"Ready: True, Exported",
				"Member exports: hangzhou",
				"In conflict: hangzhou: PortConflict: " + portConflict,
			},
		},
		"export without a Service": {
			host: []runtime.Object{beijing},
			mcs: []runtime.Object{serviceExport(
				cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, mcsv1beta1.ServiceExportReasonNoService, "no Service shop/web in the host"),
				cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, mcsv1beta1.ServiceExportReasonNoService, "no Service shop/web in the host"),
				noConflict)},
			verdict: "Not exported: ServiceExport shop/web is not valid: NoService: no Service shop/web in the host",
			lines: []string{
				"Service: none: the host has no Service shop/web",
				"Valid: False, NoService: no Service shop/web in the host",
				"ServiceImport: none: the broker makes one for a valid export",
				"none",
			},
		},
		"no Multi-Cluster Services CRDs": {
			host:     []runtime.Object{beijing, webService(), hostSlice(ep("10.0.1.5", "web-1", "beijing", "ready"))},
			crdsGone: true,
			verdict:  "Neither global nor exportable (the host does not serve the Multi-Cluster Services API), a member sees only its own endpoints: 1 ready endpoint in beijing",
			lines: []string{
				"MCS API: the host does not serve multicluster.x-k8s.io/v1beta1 (the ServiceExport and ServiceImport CRDs are not installed): no export, no import",
				"beijing 10.0.1.5 true true false - web-1 host slice",
			},
			notInText: []string{"ServiceImport:", "ServiceExport:"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			host := fake.NewClientset(tc.host...)
			mc := mcsfake.NewSimpleClientset(tc.mcs...)
			if tc.crdsGone {
				// Without the CRDs the apiserver would answer 404 for the
				// kinds as for a missing object; explain must not ask.
				mc.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("the MCS API was read though the host does not serve it")
				})
			} else {
				mcsServedBy(host)
			}
			x, err := ExplainService(t.Context(), host, mc, testNS, "web")
			if err != nil {
				t.Fatal(err)
			}
			if x.Verdict != tc.verdict {
				t.Errorf("verdict\n got %q\nwant %q", x.Verdict, tc.verdict)
			}
			var out bytes.Buffer
			if err := printServiceExplanation(&out, x, ""); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			if first, _, _ := strings.Cut(text, "\n"); first != "service shop/web: "+tc.verdict {
				t.Errorf("first line %q", first)
			}
			got := map[string]bool{}
			for _, l := range strings.Split(text, "\n") {
				got[strings.Join(strings.Fields(l), " ")] = true
			}
			for _, want := range tc.lines {
				if !got[want] {
					t.Errorf("the text has no line %q:\n%s", want, text)
				}
			}
			for _, s := range tc.notInText {
				if strings.Contains(text, s) {
					t.Errorf("the text says %q:\n%s", s, text)
				}
			}
		})
	}
}

// TestExplainServiceNotFound: a name with no Service, export or import is
// an error, as for a pod.
func TestExplainServiceNotFound(t *testing.T) {
	host := fake.NewClientset()
	mcsServedBy(host)
	if _, err := ExplainService(t.Context(), host, mcsfake.NewSimpleClientset(), testNS, "web"); err == nil ||
		!strings.Contains(err.Error(), `services "web" not found`) {
		t.Errorf("err %v, want services \"web\" not found", err)
	}
}

// TestExplainServiceJSON: -o json carries the verdict and the endpoints.
func TestExplainServiceJSON(t *testing.T) {
	host := fake.NewClientset(builder.VirtualNode("beijing").Obj(), webService(), hostSlice(ep("10.0.1.5", "web-1", "beijing", "ready")))
	mcsServedBy(host)
	x, err := ExplainService(t.Context(), host, mcsfake.NewSimpleClientset(), testNS, "web")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printServiceExplanation(&out, x, "json"); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Service ServiceExplanation `json:"service"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Service.Verdict != x.Verdict || len(got.Service.Endpoints) != 1 || got.Service.Endpoints[0].Pod != "web-1" {
		t.Errorf("json %s", out.String())
	}
}

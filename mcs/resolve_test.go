package mcs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Minute))
	t2 = metav1.NewTime(t0.Add(2 * time.Minute))
)

// export is cluster's ClusterSetIP export made at created with ports.
func export(cluster string, created metav1.Time, ports ...mcsv1beta1.ServicePort) Export {
	return Export{Cluster: cluster, Created: created, Type: mcsv1beta1.ClusterSetIP,
		SessionAffinity: corev1.ServiceAffinityNone, Ports: ports}
}

func port(name string, protocol corev1.Protocol, number int32) mcsv1beta1.ServicePort {
	return mcsv1beta1.ServicePort{Name: name, Protocol: protocol, Port: number}
}

func headless(e Export) Export {
	e.Type = mcsv1beta1.Headless
	return e
}

func clientIP(e Export, timeout int32) Export {
	e.SessionAffinity = corev1.ServiceAffinityClientIP
	e.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}
	return e
}

// TestResolve: the exports of one name merge into one ServiceImport by the
// KEP's rule (oldest export wins, ties by cluster name), and when they
// disagree every export of the name is in conflict, the oldest included
// (as the conformance suite expects), with the reason its ServiceExport
// shows.
func TestResolve(t *testing.T) {
	http := port("http", corev1.ProtocolTCP, 80)
	https := port("https", corev1.ProtocolTCP, 443)
	clusterSetIP := func(ports ...mcsv1beta1.ServicePort) mcsv1beta1.ServiceImportSpec {
		return mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, SessionAffinity: corev1.ServiceAffinityNone, Ports: ports}
	}
	both := func(r mcsv1beta1.ServiceExportConditionReason) map[string]mcsv1beta1.ServiceExportConditionReason {
		return map[string]mcsv1beta1.ServiceExportConditionReason{"beijing": r, "host": r}
	}
	for name, tc := range map[string]struct {
		exports   []Export
		spec      mcsv1beta1.ServiceImportSpec
		clusters  []string
		conflicts map[string]mcsv1beta1.ServiceExportConditionReason
	}{
		"no exports": {},
		"identical exports do not conflict": {
			exports:  []Export{export("host", t0, http), export("beijing", t1, http), export("shanghai", t2, http)},
			spec:     clusterSetIP(http),
			clusters: []string{"beijing", "host", "shanghai"},
		},
		"ports are the union": {
			exports:   []Export{export("beijing", t1, https), export("host", t0, http)},
			spec:      clusterSetIP(http, https),
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonPortConflict),
		},
		"one service's TCP and UDP on the same port both count": {
			exports:  []Export{export("host", t0, port("dns-tcp", corev1.ProtocolTCP, 53), port("dns", corev1.ProtocolUDP, 53))},
			spec:     clusterSetIP(port("dns", corev1.ProtocolUDP, 53), port("dns-tcp", corev1.ProtocolTCP, 53)),
			clusters: []string{"host"},
		},
		"a newer export adding a protocol to a port joins the union, in conflict": {
			exports:   []Export{export("host", t0, port("dns-tcp", corev1.ProtocolTCP, 53)), export("beijing", t1, port("dns-tcp", corev1.ProtocolTCP, 53), port("dns", corev1.ProtocolUDP, 53))},
			spec:      clusterSetIP(port("dns", corev1.ProtocolUDP, 53), port("dns-tcp", corev1.ProtocolTCP, 53)),
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonPortConflict),
		},
		"same port number with another name: both conflict, the oldest's port is kept": {
			exports:   []Export{export("beijing", t1, port("web", corev1.ProtocolTCP, 80)), export("host", t0, http)},
			spec:      clusterSetIP(http),
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonPortConflict),
		},
		"same port number with another protocol: both conflict, the oldest's port is kept": {
			exports:   []Export{export("host", t0, http), export("beijing", t1, port("http", corev1.ProtocolUDP, 80))},
			spec:      clusterSetIP(http),
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonPortConflict),
		},
		"an empty protocol is TCP": {
			exports:  []Export{export("host", t0, http), export("beijing", t1, port("http", "", 80))},
			spec:     clusterSetIP(http),
			clusters: []string{"beijing", "host"},
		},
		"another app protocol conflicts": {
			exports: []Export{export("host", t0, http), export("beijing", t1, mcsv1beta1.ServicePort{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, AppProtocol: ptr.To("h2c")})},
			spec:      clusterSetIP(http),
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonPortConflict),
		},
		"a name taken by another port number conflicts": {
			exports:   []Export{export("host", t0, http), export("beijing", t1, port("http", corev1.ProtocolTCP, 8080))},
			spec:      clusterSetIP(http),
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonPortConflict),
		},
		"headless against ClusterSetIP: both conflict": {
			exports:   []Export{headless(export("beijing", t0, http)), export("host", t1, http)},
			spec:      mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, SessionAffinity: corev1.ServiceAffinityNone, Ports: []mcsv1beta1.ServicePort{http}},
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonTypeConflict),
		},
		"session affinity conflicts": {
			exports:   []Export{export("host", t0, http), clientIP(export("beijing", t1, http), 60)},
			spec:      clusterSetIP(http),
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonSessionAffinityConflict),
		},
		"session affinity config conflicts": {
			exports: []Export{clientIP(export("host", t0, http), 60), clientIP(export("beijing", t1, http), 120)},
			spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, SessionAffinity: corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: clientIP(Export{}, 60).SessionAffinityConfig, Ports: []mcsv1beta1.ServicePort{http}},
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict),
		},
		"a tie on creation time goes to the first cluster name": {
			exports:   []Export{headless(export("host", t0, http)), export("beijing", t0, http)},
			spec:      clusterSetIP(http),
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonTypeConflict),
		},
		"the reason names every kind of conflict": {
			exports:  []Export{export("host", t0, http), clientIP(headless(export("beijing", t1, port("web", corev1.ProtocolTCP, 80))), 60)},
			spec:     clusterSetIP(http),
			clusters: []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonTypeConflict + "," + mcsv1beta1.ServiceExportReasonPortConflict + "," +
				mcsv1beta1.ServiceExportReasonSessionAffinityConflict),
		},
		"exported labels and annotations come whole from the oldest": {
			exports: []Export{
				func() Export { e := export("host", t0, http); e.Labels = map[string]string{"a": "1"}; return e }(),
				func() Export { e := export("beijing", t1, http); e.Labels = map[string]string{"b": "1"}; return e }(),
			},
			spec:      clusterSetIP(http),
			clusters:  []string{"beijing", "host"},
			conflicts: both(mcsv1beta1.ServiceExportReasonLabelsConflict),
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := Resolve(tc.exports)
			if diff := cmp.Diff(tc.spec, r.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.clusters, r.Clusters); diff != "" {
				t.Errorf("clusters (-want +got):\n%s", diff)
			}
			var reasons map[string]mcsv1beta1.ServiceExportConditionReason
			for c, conflict := range r.Conflicts {
				if reasons == nil {
					reasons = map[string]mcsv1beta1.ServiceExportConditionReason{}
				}
				reasons[c] = conflict.Reason
				if conflict.Message == "" {
					t.Errorf("conflict of %s has no message", c)
				}
			}
			if diff := cmp.Diff(tc.conflicts, reasons); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResolveMessageNamesTheWinner: a conflict's message says what differs
// and which cluster's export is used, so a user can fix the right one.
func TestResolveMessageNamesTheWinner(t *testing.T) {
	r := Resolve([]Export{export("host", t0, port("http", corev1.ProtocolTCP, 80)), export("beijing", t1, port("web", corev1.ProtocolTCP, 80))})
	want := "the exports of clusters beijing, host differ in ports; the oldest export's, in cluster host, are used"
	for _, c := range []string{"beijing", "host"} {
		if got := r.Conflicts[c].Message; got != want {
			t.Errorf("message of %s = %q, want %q", c, got, want)
		}
	}
}

// TestResolveKeepsItsInput: Resolve sorts a copy, not the caller's exports.
func TestResolveKeepsItsInput(t *testing.T) {
	in := []Export{export("shanghai", t2), export("beijing", t1), export("host", t0)}
	want := []Export{export("shanghai", t2), export("beijing", t1), export("host", t0)}
	Resolve(in)
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("input changed (-want +got):\n%s", diff)
	}
}

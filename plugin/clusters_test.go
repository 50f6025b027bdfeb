package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"flotilla.io/flotilla/clusternode"
	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// virtualNode is what flotilla-node publishes for a member with n nodes
// running Kubernetes version, its host v1.37.2.
func virtualNode(t *testing.T, name, member, mode string, nodes int, ready corev1.ConditionStatus, version string) *corev1.Node {
	t.Helper()
	var members []*corev1.Node
	for range nodes {
		members = append(members, builder.Node("").CPU("8").Memory("32Gi").Pods("110").Ready().Obj())
	}
	n := clusternode.Build(clusternode.Config{Name: name, Member: member, Mode: mode, InternalIP: "10.0.0.1"},
		clusternode.Snapshot{Nodes: members, Reachable: ready == corev1.ConditionTrue, Message: "connection refused",
			KubeletAPI: &clusternode.Probe{Done: true, OK: true}, Versions: &clusternode.Versions{Host: "v1.37.2", Member: version}},
		nil, now.Add(-2*time.Hour))
	return n
}

// TestListClusters: one row per virtual node, not for the host's own nodes,
// with the member, mode, readiness, version and whether it is supported,
// member node count, what the pods bound to it request, how many have not
// started, and the lease's age.
func TestListClusters(t *testing.T) {
	real := builder.Node("host-node-1").Label(wellknown.ClusterLabel, "oops").Obj()
	c := fake.NewClientset(
		virtualNode(t, "beijing", "beijing", "push", 3, corev1.ConditionTrue, "v1.35.4"),
		virtualNode(t, "far", "far", "pull", 1, corev1.ConditionFalse, "v1.33.2"),
		real,
		builder.Pod("a").Namespace("shop").Node("beijing").Container("app").CPU("500m").Memory("1Gi").Phase(corev1.PodRunning).Started(now.Add(-time.Hour)).Obj(),
		builder.Pod("b").Namespace("shop").Node("beijing").Container("app").CPU("1").Memory("1Gi").Phase(corev1.PodPending).Obj(),
		builder.Pod("c").Namespace("shop").Node("far").Container("app").CPU("2").Memory("1Gi").Phase(corev1.PodRunning).Started(now.Add(-time.Hour)).Obj(),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "beijing", Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-3 * time.Second)}}},
	)
	rows, err := ListClusters(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Name != "beijing" || rows[1].Name != "far" {
		t.Fatalf("rows %+v, want beijing and far", rows)
	}
	bj, far := rows[0], rows[1]
	if bj.Member != "beijing" || bj.Mode != "push" || bj.Ready != corev1.ConditionTrue || bj.Nodes != 3 || bj.KubernetesVersion != "v1.35.4" {
		t.Errorf("beijing: %+v", bj)
	}
	if bj.Pods != 2 || bj.Backlog != 1 {
		t.Errorf("beijing pods %d backlog %d, want 2 and 1", bj.Pods, bj.Backlog)
	}
	if got := bj.Requested[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1500m")) != 0 {
		t.Errorf("beijing requests cpu %s, want 1500m", got.String())
	}
	if got := bj.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("24")) != 0 {
		t.Errorf("beijing allocatable cpu %s, want 24", got.String())
	}
	if bj.Heartbeat == nil || !bj.Heartbeat.Equal(&metav1.Time{Time: now.Add(-3 * time.Second)}) {
		t.Errorf("beijing heartbeat %v", bj.Heartbeat)
	}
	if far.Mode != "pull" || far.Ready != corev1.ConditionFalse || !strings.Contains(far.ReadyMessage, "connection refused") || far.Heartbeat != nil {
		t.Errorf("far: %+v", far)
	}
	if bj.VersionSupported != corev1.ConditionTrue || bj.VersionMessage != "" {
		t.Errorf("beijing version verdict %q %q, want True without a message", bj.VersionSupported, bj.VersionMessage)
	}
	if far.KubernetesVersion != "v1.33.2" || far.VersionSupported != corev1.ConditionFalse || !strings.Contains(far.VersionMessage, "older than the oldest supported member version, 1.34") {
		t.Errorf("far version %q verdict %q %q, want v1.33.2 False, older than 1.34", far.KubernetesVersion, far.VersionSupported, far.VersionMessage)
	}
	if bj.KubeletAPI != "Reachable" {
		t.Errorf("beijing kubelet API %q, want Reachable", bj.KubeletAPI)
	}

	var table bytes.Buffer
	if err := printClusters(&table, rows, "", now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "VERSION   SUPPORTED") {
		t.Fatalf("table:\n%s", table.String())
	}
	if f := strings.Fields(lines[1]); len(f) < 7 || f[5] != "v1.35.4" || f[6] != "True" {
		t.Errorf("beijing line %q, want version v1.35.4 and SUPPORTED True", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) < 7 || f[5] != "v1.33.2" || f[6] != "False" {
		t.Errorf("far line %q, want version v1.33.2 and SUPPORTED False", lines[2])
	}
	var wide bytes.Buffer
	if err := printClusters(&wide, rows, "wide", now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(wide.String(), "Kubernetes v1.33.2 is older than the oldest supported member version, 1.34") {
		t.Errorf("-o wide does not say why far's version is unsupported:\n%s", wide.String())
	}
	for _, want := range []string{"beijing", "push", "True", "120m", "v1.35.4", "3", "1500m/24", "2Gi/96Gi", "3s"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("beijing line %q lacks %q", lines[1], want)
		}
	}
	var js bytes.Buffer
	if err := printClusters(&js, rows, "json", now); err != nil {
		t.Fatal(err)
	}
	var back struct{ Clusters []Cluster }
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Clusters) != 2 {
		t.Errorf("-o json: %v\n%s", err, js.String())
	}
	if err := printClusters(&js, rows, "xml", now); err == nil {
		t.Error("-o xml accepted")
	}
}

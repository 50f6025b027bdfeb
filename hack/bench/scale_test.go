package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/apis/config/v1alpha1/validation"
	"flotilla.io/flotilla/nodeconfig"
)

func TestParseLoad(t *testing.T) {
	in := `# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="coordination.k8s.io",resource="leases",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="resource",subresource="exec",verb="CONNECT",version="v1"} 4
apiserver_longrunning_requests{component="apiserver",group="",resource="secrets",scope="cluster",subresource="",verb="WATCH",version="v1"} 0
apiserver_request_total{code="429",component="apiserver",resource="pods",verb="POST"} 7
apiserver_request_total{code="201",component="apiserver",resource="pods",verb="POST"} 100
apiserver_request_total{code="429",component="apiserver",resource="leases",verb="PUT"} 1
apiserver_flowcontrol_rejected_requests_total{flow_schema="global-default",priority_level="global-default",reason="queue-full"} 8
apiserver_flowcontrol_rejected_requests_total{flow_schema="exempt",priority_level="exempt",reason="time-out"} 0
`
	got, err := parseLoad([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(watchCounts{"pods": 5, "leases.coordination.k8s.io": 1}, got.watches); diff != "" {
		t.Errorf("watches (-want +got):\n%s", diff)
	}
	if got.rejected != 8 {
		t.Errorf("rejected = %v, want 8", got.rejected)
	}
	if diff := cmp.Diff(map[string]float64{"POST pods": 7, "PUT leases": 1}, got.rejectedBy); diff != "" {
		t.Errorf("rejected by request (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"global-default/global-default/queue-full": 8}, got.rejectedByFlow); diff != "" {
		t.Errorf("rejected by flow (-want +got):\n%s", diff)
	}
	if got.watches.total() != 6 {
		t.Errorf("total = %v, want 6", got.watches.total())
	}
	d := watchCounts{"pods": 5, "nodes": 1}.sub(watchCounts{"pods": 4, "events": 1})
	if diff := cmp.Diff(watchCounts{"pods": 1, "nodes": 1, "events": -1}, d); diff != "" {
		t.Errorf("sub (-want +got):\n%s", diff)
	}
}

func TestPartitions(t *testing.T) {
	names := partitionNames(3)
	if diff := cmp.Diff([]string{"p00", "p01", "p02"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if got := partitionNames(101); got[100] != "p100" || got[7] != "p007" {
		t.Errorf("partitionNames(101) = ..., %s, ..., %s; want p007 and p100", got[7], got[100])
	}
	specs, partitionOf := partitionedNodes(names, 7, 10)
	perPartition := map[string]int{}
	for _, s := range specs {
		p := s.Labels[partitionLabel]
		if partitionOf[s.Name] != p || !strings.HasPrefix(s.Name, p+"-") {
			t.Errorf("node %s: label %s, partitionOf %s", s.Name, p, partitionOf[s.Name])
		}
		perPartition[p]++
	}
	if diff := cmp.Diff(map[string]int{"p00": 3, "p01": 2, "p02": 2}, perPartition); diff != "" {
		t.Errorf("nodes per partition (-want +got):\n%s", diff)
	}

	b, err := nodeConfig(names, []int{20001, 20002, 20003})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := nodeconfig.Parse(b)
	if err != nil {
		t.Fatalf("flotilla-node would reject the NodeConfig: %v\n%s", err, b)
	}
	nodeconfig.Default(cfg, scaleMember, 10250)
	if errs := validation.ValidateNodeConfig(cfg); len(errs) > 0 {
		t.Fatalf("invalid NodeConfig: %v\n%s", errs, b)
	}
	vc := cfg.VirtualClusters[1]
	if vc.Name != "p01" || vc.KubeletPort != 20002 || vc.NodeSelector.MatchLabels[partitionLabel] != "p01" || vc.NamespaceMapping != "Suffix" {
		t.Errorf("second virtual cluster = %+v", vc)
	}
}

func TestCheckConfinement(t *testing.T) {
	partitionOf := map[string]string{"p00-node-1": "p00", "p01-node-2": "p01"}
	partitions := []string{"p00", "p01", "p02"}
	good := map[string]podTimes{
		"a": {Namespace: "bench-p00", Node: "p00-node-1"},
		"b": {Namespace: "bench-p01", Node: "p01-node-2"},
		"c": {Namespace: "bench-p01", Node: "p01-node-2"},
		"d": {Namespace: "bench-p00", Node: "p01-node-2", Gone: time.Unix(1, 0)}, // gone: not counted
	}
	counts, err := checkConfinement(good, partitionOf, partitions)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"p00": 1, "p01": 2}, counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if least, most := minMax(counts, partitions); least != 0 || most != 2 {
		t.Errorf("minMax = %d, %d; want 0, 2", least, most)
	}
	bad := map[string]podTimes{
		"a": {Namespace: "bench-p00", Node: "p01-node-2"},
		"b": {Namespace: "other", Node: "p00-node-1"},
	}
	_, err = checkConfinement(bad, partitionOf, partitions)
	if err == nil || !strings.Contains(err.Error(), "2 member pods") || !strings.Contains(err.Error(), `partition "p01"`) {
		t.Errorf("err = %v, want both pods reported", err)
	}
}

func lease(name string, at time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: at}}}
}

func readyNode(name string, ready bool, taints ...string) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionUnknown
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test"}}}}
	for _, k := range taints {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
	}
	return n
}

func TestHeartbeatStats(t *testing.T) {
	t0 := time.Unix(10000, 0)
	clock := t0
	h := newHeartbeats([]string{"a", "b"}, func() time.Time { return clock })
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	h.observeNode(readyNode("a", true), false)
	h.observeNode(readyNode("b", false), false)
	h.observeNode(readyNode("other", false), false) // not followed
	clock = at(5 * time.Second)
	h.observeNode(readyNode("b", true), false)
	// a renews every 10 s; b every 10 s but misses one (a 20 s gap).
	for _, s := range []int{0, 10, 20, 30, 40, 50, 60} {
		h.observeLease(lease("a", at(time.Duration(s)*time.Second)))
	}
	h.observeLease(lease("a", at(60*time.Second))) // an update that is not a renewal
	for _, s := range []int{2, 12, 32, 42, 52} {
		h.observeLease(lease("b", at(time.Duration(s)*time.Second)))
	}
	h.observeLease(lease("other", at(time.Second)))
	// a is lost for 8 s: tainted, then Ready again.
	clock = at(44 * time.Second)
	h.observeNode(readyNode("a", true, corev1.TaintNodeUnreachable), false)
	clock = at(52 * time.Second)
	h.observeNode(readyNode("a", true), false)

	got := h.stats(at(10*time.Second), at(60*time.Second), 15*time.Second)
	want := heartbeatStats{
		Renewals: 5 + 4, MinRenewals: 4, MaxGap: 20 * time.Second, Late: 1,
		Lost: 1, Unusable: 8 * time.Second, Why: []string{"a at " + at(44*time.Second).Format("15:04:05.000") + ": tainted " + corev1.TaintNodeUnreachable},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}

	// Before b was first Ready it was unusable, but it never lost Ready.
	early := h.stats(t0.Add(-time.Second), at(10*time.Second), 15*time.Second)
	if early.Lost != 0 || early.Unusable != 5*time.Second {
		t.Errorf("early window: lost %d, unusable %s; want 0, 5s", early.Lost, early.Unusable)
	}
	// A lease that stops renewing shows as a growing gap to the window's end.
	late := h.stats(at(50*time.Second), at(90*time.Second), 15*time.Second)
	if late.MaxGap != 38*time.Second || late.Late != 2 {
		t.Errorf("late window: max gap %s, late %d; want 38s, 2", late.MaxGap, late.Late)
	}
	// A lease never renewed in the window counts as unrenewed.
	none := h.stats(at(61*time.Second), at(70*time.Second), 15*time.Second)
	if none.Unrenewed != 2 || none.MinRenewals != 0 {
		t.Errorf("empty window: unrenewed %d, fewest %d; want 2, 0", none.Unrenewed, none.MinRenewals)
	}

	clock = at(100 * time.Second)
	h.observeNode(readyNode("b", true), true)
	gone := h.stats(at(90*time.Second), at(110*time.Second), 15*time.Second)
	if gone.Lost != 1 || gone.Unusable != 10*time.Second {
		t.Errorf("deleted node: lost %d, unusable %s; want 1, 10s", gone.Lost, gone.Unusable)
	}
}

func TestHeartbeatsWaitUsable(t *testing.T) {
	t0 := time.Unix(10000, 0)
	clock := t0
	h := newHeartbeats([]string{"a", "b"}, func() time.Time { return clock })
	h.observeNode(readyNode("a", true), false)
	done := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		last, err := h.waitUsable(ctx, []string{"a", "b"}, t0.Add(-time.Second))
		if err != nil {
			t.Error(err)
		}
		done <- last
	}()
	clock = t0.Add(3 * time.Second)
	h.observeNode(readyNode("b", true), false)
	if last := <-done; !last.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("last Ready at %s, want %s", last, t0.Add(3*time.Second))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	h.observeNode(readyNode("a", false), false)
	if _, err := h.waitUsable(ctx, []string{"a"}, t0); err == nil {
		t.Error("want a timeout while a is not Ready")
	}
}

func TestScaleReport(t *testing.T) {
	r := &results{Scale: &scaleResult{Partitions: 50, Nodes: 500, Pods: 500,
		Baseline: sample{"watches.member": 7, "watch_detail.member.pods": 1, "watch_detail.member.nodes": 1},
		Scale:    sample{"watches.member": 7, "heartbeat.idle.max_renew_gap_s": 10.2, "watch_detail.member.pods": 1}}}
	var out bytes.Buffer
	r.printTable(&out)
	for _, want := range []string{"1 partition", "50 partitions", "member watches held by flotilla-node", "10.2",
		"member watches of flotilla-node by resource: 1 partition: nodes 1, pods 1; 50 partitions: pods 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "native") {
		t.Errorf("table shows modes that did not run:\n%s", out.String())
	}
	out.Reset()
	r.printMarkdown(&out)
	if want := "| member watches held by flotilla-node | 7 | 7 |"; !strings.Contains(out.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, out.String())
	}
}

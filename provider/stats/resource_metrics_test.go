// This file tests the stats summary and resource metrics of a virtual node.

package stats

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/wellknown"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestCounter(t *testing.T) {
	type step struct {
		rate   float64
		at     time.Duration // after t0
		window time.Duration
	}
	for name, tc := range map[string]struct {
		steps []step
		want  []float64 // core-seconds after each step
	}{
		"first sample is the rate over its window": {
			steps: []step{{rate: 0.5, at: 10 * time.Second, window: 10 * time.Second}},
			want:  []float64{counterStart + 5},
		},
		"later samples add their rate since the previous one": {
			steps: []step{
				{rate: 0.5, at: 10 * time.Second, window: 10 * time.Second},
				{rate: 0.25, at: 20 * time.Second, window: 10 * time.Second},
				{rate: 2, at: 25 * time.Second, window: 5 * time.Second},
			},
			want: []float64{counterStart + 5, counterStart + 7.5, counterStart + 17.5},
		},
		"a sample seen again or out of order changes nothing": {
			steps: []step{
				{rate: 0.5, at: 20 * time.Second, window: 10 * time.Second},
				{rate: 0.5, at: 20 * time.Second, window: 10 * time.Second},
				{rate: 9, at: 10 * time.Second, window: 10 * time.Second},
			},
			want: []float64{counterStart + 5, counterStart + 5, counterStart + 5},
		},
		"an idle container's counter is not zero": {
			steps: []step{{rate: 0, at: 10 * time.Second, window: 10 * time.Second}},
			want:  []float64{counterStart},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var c counter
			var got []float64
			for _, s := range tc.steps {
				c.add(s.rate, t0.Add(s.at), s.window, t0)
				got = append(got, c.coreSeconds)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("core-seconds (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeMetrics is a member metrics API holding fixed answers.
type fakeMetrics struct {
	pods  []metricsv1beta1.PodMetrics
	nodes []metricsv1beta1.NodeMetrics
	err   error
	// podSelector and nodeSelector record what was asked for.
	podSelector, nodeSelector string
}

func (f *fakeMetrics) PodMetrics(_ context.Context, s labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	f.podSelector = s.String()
	var out []metricsv1beta1.PodMetrics
	for _, p := range f.pods {
		if s.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, f.err
}

func (f *fakeMetrics) NodeMetrics(_ context.Context, s labels.Selector) ([]metricsv1beta1.NodeMetrics, error) {
	f.nodeSelector = s.String()
	return f.nodes, f.err
}

// memberPod is a pod flotilla forwarded to the member as ns/name from host
// pod hostNS/hostName with UID uid, running containers started at start.
func memberPod(ns, name, hostNS, hostName, uid string, start time.Time, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{
				wellknown.ClusterLabel: "beijing", wellknown.InstallationLabel: "host-1", wellknown.HostUIDLabel: uid,
			},
			Annotations: map[string]string{wellknown.HostNamespaceAnnotation: hostNS, wellknown.HostNameAnnotation: hostName},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: ptr.To(metav1.NewTime(start))},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(start)}},
		})
	}
	return p
}

// podLister lists pods as the member pod cache of installation host-1
// holds them.
func podLister(t *testing.T, pods ...*corev1.Pod) memberpod.Lister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	transform := podcache.MemberPodTransform("host-1")
	for _, p := range pods {
		obj, err := transform(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	return memberpod.Lister{Indexer: idx}
}

func usageList(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

func podMetrics(ns, name string, l map[string]string, at time.Time, containers ...metricsv1beta1.ContainerMetrics) metricsv1beta1.PodMetrics {
	return metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		Timestamp:  metav1.NewTime(at), Window: metav1.Duration{Duration: 10 * time.Second},
		Containers: containers,
	}
}

func nodeMetrics(name string, at time.Time, cpu, memory string) metricsv1beta1.NodeMetrics {
	return metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Timestamp:  metav1.NewTime(at), Window: metav1.Duration{Duration: 10 * time.Second},
		Usage: usageList(cpu, memory),
	}
}

// fresh is when the forwarded pod that the member's metrics do not cover
// yet started.
var fresh = t0.Add(50 * time.Second)

// world is a member with one forwarded pod of two containers, one forwarded
// pod too new for the member's metrics, a pod of the member's own and a pod
// another virtual node forwarded, on two nodes.
func world(t *testing.T, at time.Time) (*fakeMetrics, memberpod.Lister) {
	forwarded := memberPod("web", "api-0", "web", "api-0", "uid-api-0", t0, "app", "sidecar")
	own := memberPod("kube-system", "dns", "", "", "", t0, "dns")
	own.Labels, own.Annotations = nil, nil
	other := memberPod("web", "api-1", "web", "api-1", "uid-api-1", t0, "app")
	other.Labels[wellknown.ClusterLabel] = "hangzhou"
	m := &fakeMetrics{
		pods: []metricsv1beta1.PodMetrics{
			podMetrics("web", "api-0", forwarded.Labels, at,
				metricsv1beta1.ContainerMetrics{Name: "sidecar", Usage: usageList("50m", "10Mi")},
				metricsv1beta1.ContainerMetrics{Name: "app", Usage: usageList("250m", "100Mi")}),
			podMetrics("kube-system", "dns", own.Labels, at, metricsv1beta1.ContainerMetrics{Name: "dns", Usage: usageList("5m", "20Mi")}),
			podMetrics("web", "api-1", other.Labels, at, metricsv1beta1.ContainerMetrics{Name: "app", Usage: usageList("1", "1Gi")}),
		},
		nodes: []metricsv1beta1.NodeMetrics{
			nodeMetrics("node-1", at.Add(-time.Second), "300m", "200Mi"),
			nodeMetrics("node-2", at, "1100m", "1100Mi"),
		},
	}
	unsampled := memberPod("web", "api-2", "web", "api-2", "uid-api-2", fresh, "app")
	return m, podLister(t, forwarded, own, other, unsampled)
}

func TestResourceMetricsSummary(t *testing.T) {
	at := t0.Add(time.Minute)
	m, pods := world(t, at)
	rm, err := NewResourceMetrics(ResourceMetricsConfig{
		NodeName: "beijing", Installation: "host-1", Metrics: m, MemberPods: pods,
		NodeSelector: labels.SelectorFromSet(labels.Set{"location": "beijing"}),
		Clock:        clocktesting.NewFakePassiveClock(at),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rm.GetStatsSummary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := "flotilla.io/cluster=beijing,flotilla.io/installation=host-1"; m.podSelector != want {
		t.Errorf("pod metrics selector = %q, want %q", m.podSelector, want)
	}
	if m.nodeSelector != "location=beijing" {
		t.Errorf("node metrics selector = %q, want the virtual node's", m.nodeSelector)
	}
	ts := metav1.NewTime(at)
	cpu := func(cores, seconds float64) *statsv1alpha1.CPUStats {
		return &statsv1alpha1.CPUStats{Time: ts, UsageNanoCores: ptr.To(uint64(math.Round(cores * 1e9))), UsageCoreNanoSeconds: ptr.To(uint64(math.Round(seconds * 1e9)))}
	}
	mem := func(b uint64) *statsv1alpha1.MemoryStats {
		return &statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: ptr.To(b)}
	}
	want := &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{
			NodeName: "beijing",
			// Both member nodes, over the longest window, at the newest time.
			CPU:    cpu(1.4, counterStart+14),
			Memory: mem(1300 << 20),
		},
		Pods: []statsv1alpha1.PodStats{{
			PodRef:    statsv1alpha1.PodReference{Namespace: "web", Name: "api-0", UID: "uid-api-0"},
			StartTime: metav1.NewTime(t0),
			Containers: []statsv1alpha1.ContainerStats{
				{Name: "app", StartTime: metav1.NewTime(t0), CPU: cpu(0.25, counterStart+2.5), Memory: mem(100 << 20)},
				{Name: "sidecar", StartTime: metav1.NewTime(t0), CPU: cpu(0.05, counterStart+0.5), Memory: mem(10 << 20)},
			},
			CPU:    cpu(0.3, 2*counterStart+3),
			Memory: mem(110 << 20),
		}, {
			// Running, not scraped yet: listed, as a kubelet lists it, with
			// no usage.
			PodRef:     statsv1alpha1.PodReference{Namespace: "web", Name: "api-2", UID: "uid-api-2"},
			StartTime:  metav1.NewTime(fresh),
			Containers: []statsv1alpha1.ContainerStats{{Name: "app", StartTime: metav1.NewTime(fresh)}},
		}},
	}
	// Float rounding may differ by a nanosecond.
	approx := cmp.Comparer(func(a, b uint64) bool { d := int64(a - b); return -1 <= d && d <= 1 })
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func TestResourceMetricsPrometheus(t *testing.T) {
	at := t0.Add(time.Minute)
	m, pods := world(t, at)
	clock := clocktesting.NewFakePassiveClock(at)
	rm, err := NewResourceMetrics(ResourceMetricsConfig{
		NodeName: "beijing", Installation: "host-1", Metrics: m, MemberPods: pods, Clock: clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	// scrape returns what metrics-server would read: value and timestamp by
	// series, parsed back from the text format.
	type point struct {
		v  float64
		ms int64
	}
	scrape := func() map[string]point {
		t.Helper()
		families, err := rm.GetMetricsResource(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, f := range families {
			if err := enc.Encode(f); err != nil {
				t.Fatal(err)
			}
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		parsed, err := parser.TextToMetricFamilies(&b)
		if err != nil {
			t.Fatalf("parse /metrics/resource: %v", err)
		}
		out := map[string]point{}
		for name, f := range parsed {
			for _, m := range f.Metric {
				var l []string
				for _, p := range m.Label {
					l = append(l, p.GetName()+"="+p.GetValue())
				}
				// virtual-kubelet's conformance suite reads the pod's
				// name as the second label.
				if strings.HasPrefix(name, "pod_") || strings.HasPrefix(name, "container_") {
					if len(m.Label) < 2 || m.Label[1].GetName() != "pod" {
						t.Errorf("%s%v: the second label is not the pod", name, l)
					}
				}
				slices.Sort(l)
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				out[name+"{"+strings.Join(l, ",")+"}"] = point{v, m.GetTimestampMs()}
			}
		}
		return out
	}
	ms := at.UnixMilli()
	want := map[string]point{
		"container_cpu_usage_seconds_total{container=app,namespace=web,pod=api-0}":      {counterStart + 2.5, ms},
		"container_cpu_usage_seconds_total{container=sidecar,namespace=web,pod=api-0}":  {counterStart + 0.5, ms},
		"container_memory_working_set_bytes{container=app,namespace=web,pod=api-0}":     {100 << 20, ms},
		"container_memory_working_set_bytes{container=sidecar,namespace=web,pod=api-0}": {10 << 20, ms},
		"container_start_time_seconds{container=app,namespace=web,pod=api-0}":           {float64(t0.Unix()), ms},
		"container_start_time_seconds{container=sidecar,namespace=web,pod=api-0}":       {float64(t0.Unix()), ms},
		"node_cpu_usage_seconds_total{}":                                                {counterStart + 14, ms},
		"node_memory_working_set_bytes{}":                                               {1300 << 20, ms},
		"pod_cpu_usage_seconds_total{namespace=web,pod=api-0}":                          {2*counterStart + 3, ms},
		"pod_memory_working_set_bytes{namespace=web,pod=api-0}":                         {110 << 20, ms},
		// Started since the member's last scrape: next to no CPU used,
		// working set unknown.
		"container_cpu_usage_seconds_total{container=app,namespace=web,pod=api-2}": {counterStart, fresh.UnixMilli()},
		"container_start_time_seconds{container=app,namespace=web,pod=api-2}":      {float64(fresh.Unix()), fresh.UnixMilli()},
		"pod_cpu_usage_seconds_total{namespace=web,pod=api-2}":                     {counterStart, fresh.UnixMilli()},
	}
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })
	if diff := cmp.Diff(want, scrape(), approx, cmp.AllowUnexported(point{})); diff != "" {
		t.Errorf("/metrics/resource (-want +got):\n%s", diff)
	}

	// Ten seconds later the member reports new rates: the counters grow by
	// the new rate times the time between the samples.
	later := at.Add(10 * time.Second)
	m2, _ := world(t, later)
	m2.pods[0].Containers[1].Usage = usageList("500m", "100Mi")
	m.pods, m.nodes = m2.pods, m2.nodes
	clock.SetTime(later)
	const app = "container_cpu_usage_seconds_total{container=app,namespace=web,pod=api-0}"
	if got, want := scrape()[app], (point{counterStart + 2.5 + 5, later.UnixMilli()}); !approxPoint(got.v, want.v) || got.ms != want.ms {
		t.Errorf("after a second sample, %s = %+v, want %+v", app, got, want)
	}

	// A pod the member stops reporting keeps its counter for a while, so
	// that a gap in the member's metrics does not restart it lower.
	m.pods = nil
	clock.SetTime(later.Add(counterRetention - time.Second))
	scrape()
	m.pods = m2.pods
	if got := scrape()[app]; !approxPoint(got.v, counterStart+7.5) {
		t.Errorf("after a gap, %s = %v, want the counter kept at %v", app, got.v, counterStart+7.5)
	}
	m.pods = nil
	clock.SetTime(later.Add(2*counterRetention + time.Second))
	scrape()
	if n := len(rm.containers); n != 0 {
		t.Errorf("%d counters kept after their pods were gone for longer than the retention", n)
	}
}

func approxPoint(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestResourceMetricsMemberError(t *testing.T) {
	pods := podLister(t)
	rm, err := NewResourceMetrics(ResourceMetricsConfig{
		NodeName: "beijing", Metrics: &fakeMetrics{err: errors.New("the server is currently unable to handle the request")}, MemberPods: pods,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rm.GetMetricsResource(context.Background()); err == nil || !strings.Contains(err.Error(), "cluster beijing") {
		t.Errorf("GetMetricsResource with the member's metrics API down: err = %v, want one naming the cluster", err)
	}
}

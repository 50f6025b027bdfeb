// This file serves /metrics/resource, the kubelet's resource metrics
// in Prometheus form.

package stats

import (
	"context"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/trace"
	"k8s.io/utils/ptr"
)

// GetMetricsResource returns the kubelet's /metrics/resource families for
// the virtual node and the pods it forwarded.
func (m *ResourceMetrics) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	ctx, span := trace.StartSpan(ctx, "provider.GetMetricsResource")
	defer span.End()
	snap, err := m.collect(ctx)
	if err != nil {
		return nil, err
	}
	return families(snap), nil
}

// Names and help of the kubelet's resource metrics, which metrics-server reads.
const (
	nodeCPUMetric            = "node_cpu_usage_seconds_total"
	nodeMemoryMetric         = "node_memory_working_set_bytes"
	podCPUMetric             = "pod_cpu_usage_seconds_total"
	podMemoryMetric          = "pod_memory_working_set_bytes"
	containerCPUMetric       = "container_cpu_usage_seconds_total"
	containerMemoryMetric    = "container_memory_working_set_bytes"
	containerStartTimeMetric = "container_start_time_seconds"
)

func families(snap snapshot) []*dto.MetricFamily {
	nodeCPU := family(nodeCPUMetric, "[STABLE] Cumulative cpu time consumed by the node in core-seconds", dto.MetricType_COUNTER)
	nodeMemory := family(nodeMemoryMetric, "[STABLE] Current working set of the node in bytes", dto.MetricType_GAUGE)
	podCPU := family(podCPUMetric, "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", dto.MetricType_COUNTER)
	podMemory := family(podMemoryMetric, "[STABLE] Current working set of the pod in bytes", dto.MetricType_GAUGE)
	containerCPU := family(containerCPUMetric, "[STABLE] Cumulative cpu time consumed by the container in core-seconds", dto.MetricType_COUNTER)
	containerMemory := family(containerMemoryMetric, "[STABLE] Current working set of the container in bytes", dto.MetricType_GAUGE)
	containerStart := family(containerStartTimeMetric, "[STABLE] Start time of the container since unix epoch in seconds", dto.MetricType_GAUGE)
	if n := snap.node; n != nil {
		add(nodeCPU, nil, n.cpuSeconds, n.at)
		add(nodeMemory, nil, float64(n.memoryBytes), n.at)
	}
	for _, p := range snap.pods {
		var cpu float64
		var memory uint64
		var at time.Time
		sampled := false
		for _, c := range p.containers {
			l := labelPairs("namespace", p.namespace, "pod", p.name, "container", c.name)
			if !c.sampled {
				// Started since the member's last scrape: it has used next
				// to no CPU yet, and its working set is unknown.
				add(containerCPU, l, counterStart, c.start)
				add(containerStart, l, float64(c.start.UnixNano())/1e9, c.start)
				cpu += counterStart
				at = latest(at, c.start)
				continue
			}
			sampled = true
			add(containerCPU, l, c.cpuSeconds, c.at)
			add(containerMemory, l, float64(c.memoryBytes), c.at)
			if !c.start.IsZero() {
				add(containerStart, l, float64(c.start.UnixNano())/1e9, c.at)
			}
			cpu += c.cpuSeconds
			memory += c.memoryBytes
			at = latest(at, c.at)
		}
		l := labelPairs("namespace", p.namespace, "pod", p.name)
		add(podCPU, l, cpu, at)
		if sampled {
			add(podMemory, l, float64(memory), at)
		}
	}
	var out []*dto.MetricFamily
	for _, f := range []*dto.MetricFamily{containerCPU, containerMemory, containerStart, nodeCPU, nodeMemory, podCPU, podMemory} {
		if len(f.Metric) > 0 {
			out = append(out, f)
		}
	}
	return out
}

func family(name, help string, typ dto.MetricType) *dto.MetricFamily {
	return &dto.MetricFamily{Name: ptr.To(name), Help: ptr.To(help), Type: typ.Enum()}
}

// add appends a sample stamped with the member's sample time, which is what
// metrics-server divides counter increases by.
func add(f *dto.MetricFamily, l []*dto.LabelPair, v float64, at time.Time) {
	m := &dto.Metric{Label: l, TimestampMs: ptr.To(at.UnixMilli())}
	if f.GetType() == dto.MetricType_COUNTER {
		m.Counter = &dto.Counter{Value: ptr.To(v)}
	} else {
		m.Gauge = &dto.Gauge{Value: ptr.To(v)}
	}
	f.Metric = append(f.Metric, m)
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// labelPairs turns name, value, ... into label pairs, in that order:
// namespace, pod, container — from the widest scope, as virtual-kubelet's
// conformance suite expects; consumers such as metrics-server read labels
// by name.
func labelPairs(kv ...string) []*dto.LabelPair {
	out := make([]*dto.LabelPair, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &dto.LabelPair{Name: ptr.To(kv[i]), Value: ptr.To(kv[i+1])})
	}
	return out
}

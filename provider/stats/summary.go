// This file serves /stats/summary, the kubelet stats summary.

package stats

import (
	"context"

	"github.com/virtual-kubelet/virtual-kubelet/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// GetStatsSummary returns the kubelet stats summary of the virtual node:
// the node's CPU and memory, and those of the pods it forwarded.
func (m *ResourceMetrics) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	ctx, span := trace.StartSpan(ctx, "provider.GetStatsSummary")
	defer span.End()
	snap, err := m.collect(ctx)
	if err != nil {
		return nil, err
	}
	return summary(m.cfg.NodeName, snap), nil
}

func summary(nodeName string, snap snapshot) *statsv1alpha1.Summary {
	s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: nodeName}}
	if n := snap.node; n != nil {
		s.Node.CPU, s.Node.Memory = cpuStats(*n), memoryStats(*n)
	}
	s.Pods = []statsv1alpha1.PodStats{}
	for _, p := range snap.pods {
		ps := statsv1alpha1.PodStats{
			PodRef:    statsv1alpha1.PodReference{Name: p.name, Namespace: p.namespace, UID: string(p.uid)},
			StartTime: metav1.NewTime(p.start),
		}
		var total sample
		sampled := false
		for _, c := range p.containers {
			cs := statsv1alpha1.ContainerStats{Name: c.name, StartTime: metav1.NewTime(c.start)}
			if !c.sampled {
				ps.Containers = append(ps.Containers, cs)
				continue
			}
			sampled = true
			cs.CPU, cs.Memory = cpuStats(c.sample), memoryStats(c.sample)
			ps.Containers = append(ps.Containers, cs)
			total.cpuRate += c.cpuRate
			total.cpuSeconds += c.cpuSeconds
			total.memoryBytes += c.memoryBytes
			if c.at.After(total.at) {
				total.at = c.at
			}
		}
		if sampled {
			ps.CPU, ps.Memory = cpuStats(total), memoryStats(total)
		}
		s.Pods = append(s.Pods, ps)
	}
	return s
}

func cpuStats(u sample) *statsv1alpha1.CPUStats {
	return &statsv1alpha1.CPUStats{
		Time:                 metav1.NewTime(u.at),
		UsageNanoCores:       ptr.To(uint64(u.cpuRate * 1e9)),
		UsageCoreNanoSeconds: ptr.To(uint64(u.cpuSeconds * 1e9)),
	}
}

func memoryStats(u sample) *statsv1alpha1.MemoryStats {
	return &statsv1alpha1.MemoryStats{Time: metav1.NewTime(u.at), WorkingSetBytes: ptr.To(u.memoryBytes)}
}

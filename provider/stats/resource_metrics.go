// This file integrates the member's usage rates into the counters a
// kubelet reports, for each container the virtual node forwarded.

package stats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/clock"

	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/wellknown"
)

// A virtual node's /stats/summary and /metrics/resource are computed from
// the member's resource metrics API (metrics.k8s.io, served by the member's
// metrics-server), not by proxying to the member's kubelets: reading
// nodes/proxy in the member would let flotilla exec into every member pod.
//
// metrics.k8s.io reports usage rates (CPU cores averaged over a window
// ending at a timestamp) while the kubelet API reports cumulative CPU time,
// from which metrics-server in the host derives rates again. The counters
// here integrate the member's rates over the member's sample timestamps:
//
//	first sample (rate r, window w):    total = 1ns + r·w
//	later sample at t, previous at t':  total += r·(t − t')   (t > t')
//	sample not newer than the last:     ignored
//
// so each counter only ever grows, and the rate the host derives between
// two samples is the member's rate. It is exact when every member sample is
// seen (the host scrapes at least as often as the member does) and holds the
// latest rate over a gap otherwise. The 1ns start keeps an idle container's
// counter non-zero: metrics-server discards zero counters as missing data.
// Counters live in memory, keyed by host pod UID and container: a restart
// of a member container does not reset them (its new start time, reported
// as container_start_time_seconds, tells metrics-server), and a restart of
// flotilla-node starts them afresh, which metrics-server sees as a reset.

// counterStart is where every CPU counter starts, in core-seconds.
const counterStart = 1e-9

// counterRetention is how long the counter of a container no longer
// reported by the member is kept, so that a short gap in the member's
// metrics does not restart it.
const counterRetention = 5 * time.Minute

// ResourceMetricsConfig holds what ResourceMetrics needs; all fields but
// Installation, NodeSelector and Clock are required.
type ResourceMetricsConfig struct {
	// NodeName is the virtual node; with Installation it selects the member
	// pods this virtual node forwarded (see wellknown.InstallationLabel).
	NodeName     string
	Installation string
	Metrics      MemberMetrics
	// MemberPods gives the host pod of a member pod (its identity labels and
	// annotations) and its containers' start times.
	MemberPods memberpod.Lister
	// NodeSelector picks the member nodes the virtual node stands for; nil
	// means all of them.
	NodeSelector labels.Selector
	// Clock ages out counters; it defaults to the real clock.
	Clock clock.PassiveClock
}

// ResourceMetrics serves a virtual node's kubelet stats (/stats/summary) and
// resource metrics (/metrics/resource) for the pods it forwarded, under
// their host namespace and name, and for the node as the sum over the member
// nodes it stands for. Safe for concurrent use.
type ResourceMetrics struct {
	cfg  ResourceMetricsConfig
	pods labels.Selector

	mu         sync.Mutex
	node       counter
	containers map[containerKey]*counter
}

type containerKey struct {
	hostUID   types.UID
	container string
}

// NewResourceMetrics returns the resource metrics of one virtual node.
func NewResourceMetrics(cfg ResourceMetricsConfig) (*ResourceMetrics, error) {
	if cfg.NodeName == "" || cfg.Metrics == nil || cfg.MemberPods.Indexer == nil {
		return nil, errors.New("provider: resource metrics need NodeName, Metrics and MemberPods")
	}
	if cfg.NodeSelector == nil {
		cfg.NodeSelector = labels.Everything()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	set := labels.Set{wellknown.ClusterLabel: cfg.NodeName}
	if cfg.Installation != "" {
		set[wellknown.InstallationLabel] = cfg.Installation
	}
	return &ResourceMetrics{cfg: cfg, pods: labels.SelectorFromSet(set), containers: map[containerKey]*counter{}}, nil
}

// counter integrates a CPU usage rate sampled at increasing times into
// cumulative CPU time (see the top of this file).
type counter struct {
	coreSeconds float64
	rate        float64 // cores, of the last sample integrated
	at          time.Time
	seen        time.Time // on the local clock, for retention
}

func (c *counter) add(rate float64, at time.Time, window time.Duration, now time.Time) {
	c.seen = now
	switch {
	case c.at.IsZero():
		c.coreSeconds = counterStart + rate*window.Seconds()
	case at.After(c.at):
		c.coreSeconds += rate * at.Sub(c.at).Seconds()
	default:
		return
	}
	c.rate, c.at = rate, at
}

// sample is one CPU and memory usage sample as the kubelet API reports it.
type sample struct {
	at          time.Time
	cpuRate     float64 // cores
	cpuSeconds  float64 // cumulative core-seconds
	memoryBytes uint64  // working set
}

type containerSample struct {
	name    string
	start   time.Time // zero when unknown
	sampled bool      // false: running, not yet in the member's metrics
	sample
}

type podSample struct {
	namespace, name string // the host pod's
	uid             types.UID
	start           time.Time
	containers      []containerSample
}

// snapshot is the virtual node's usage at one request.
type snapshot struct {
	node *sample // nil when the member reports no node
	pods []podSample
}

// collect reads the member's metrics and advances the counters.
func (m *ResourceMetrics) collect(ctx context.Context) (snapshot, error) {
	podMetrics, err := m.cfg.Metrics.PodMetrics(ctx, m.pods)
	if err != nil {
		return snapshot{}, fmt.Errorf("pod metrics of cluster %s: %w", m.cfg.NodeName, err)
	}
	nodeMetrics, err := m.cfg.Metrics.NodeMetrics(ctx, m.cfg.NodeSelector)
	if err != nil {
		return snapshot{}, fmt.Errorf("node metrics of cluster %s: %w", m.cfg.NodeName, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	var snap snapshot
	sampled := map[types.UID]bool{}
	for i := range podMetrics {
		if p, ok := m.podSampleLocked(&podMetrics[i], now); ok {
			snap.pods = append(snap.pods, p)
			sampled[p.uid] = true
		}
	}
	// A kubelet lists a container as soon as it runs; the member's
	// metrics-server only after scraping it (twice, for CPU). Until then
	// the pod is listed with its running containers and no usage.
	members, err := m.cfg.MemberPods.List(m.pods)
	if err != nil {
		return snapshot{}, fmt.Errorf("pods of cluster %s: %w", m.cfg.NodeName, err)
	}
	for _, member := range members {
		if p, ok := unsampledPod(member); ok && !sampled[p.uid] {
			snap.pods = append(snap.pods, p)
		}
	}
	slices.SortFunc(snap.pods, func(a, b podSample) int {
		return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name)
	})
	if len(nodeMetrics) > 0 {
		snap.node = m.nodeUsageLocked(nodeMetrics, now)
	}
	for k, c := range m.containers {
		if now.Sub(c.seen) > counterRetention {
			delete(m.containers, k)
		}
	}
	return snap, nil
}

// podSampleLocked maps one member pod's metrics to its host pod.
func (m *ResourceMetrics) podSampleLocked(pm *metricsv1beta1.PodMetrics, now time.Time) (podSample, bool) {
	member, err := m.cfg.MemberPods.Get(pm.Namespace, pm.Name)
	if err != nil {
		return podSample{}, false // not in the cache yet, or gone
	}
	p, ok := hostIdentity(member)
	if !ok {
		return podSample{}, false
	}
	for _, cm := range pm.Containers {
		key := containerKey{p.uid, cm.Name}
		c := m.containers[key]
		if c == nil {
			c = &counter{}
			m.containers[key] = c
		}
		rate := cores(cm.Usage.Cpu())
		c.add(rate, pm.Timestamp.Time, pm.Window.Duration, now)
		p.containers = append(p.containers, containerSample{
			name:    cm.Name,
			start:   containerStart(member, cm.Name),
			sampled: true,
			sample:  sample{at: c.at, cpuRate: c.rate, cpuSeconds: c.coreSeconds, memoryBytes: byteCount(cm.Usage.Memory())},
		})
	}
	slices.SortFunc(p.containers, func(a, b containerSample) int { return strings.Compare(a.name, b.name) })
	return p, len(p.containers) > 0
}

// unsampledPod is a running member pod as a podSample without usage.
func unsampledPod(member *memberpod.Pod) (podSample, bool) {
	p, ok := hostIdentity(member)
	if !ok || member.Status.Phase != corev1.PodRunning {
		return podSample{}, false
	}
	for _, c := range member.Spec.Containers {
		if start := containerStart(member, c.Name); !start.IsZero() {
			p.containers = append(p.containers, containerSample{name: c.Name, start: start})
		}
	}
	slices.SortFunc(p.containers, func(a, b containerSample) int { return strings.Compare(a.name, b.name) })
	return p, len(p.containers) > 0
}

// hostIdentity is the host pod a member pod stands for.
func hostIdentity(member *memberpod.Pod) (podSample, bool) {
	ns, name := podcache.HostKeyOf(member)
	p := podSample{namespace: ns, name: name, uid: member.HostUID}
	if p.namespace == "" || p.name == "" || p.uid == "" {
		return podSample{}, false
	}
	if member.Status.StartTime != nil {
		p.start = member.Status.StartTime.Time
	}
	return p, true
}

// nodeUsageLocked sums the member nodes' usage into the virtual node's.
func (m *ResourceMetrics) nodeUsageLocked(nodes []metricsv1beta1.NodeMetrics, now time.Time) *sample {
	var rate float64
	var memory uint64
	var at time.Time
	var window time.Duration
	for _, n := range nodes {
		rate += cores(n.Usage.Cpu())
		memory += byteCount(n.Usage.Memory())
		// The member's samples of one scrape round differ by the time it
		// took to scrape; the newest stands for the round.
		if n.Timestamp.After(at) {
			at = n.Timestamp.Time
		}
		window = max(window, n.Window.Duration)
	}
	m.node.add(rate, at, window, now)
	return &sample{at: m.node.at, cpuRate: m.node.rate, cpuSeconds: m.node.coreSeconds, memoryBytes: memory}
}

func cores(q *resource.Quantity) float64 { return float64(q.ScaledValue(resource.Nano)) / 1e9 }

func byteCount(q *resource.Quantity) uint64 {
	if v := q.Value(); v > 0 {
		return uint64(v)
	}
	return 0
}

func containerStart(p *memberpod.Pod, container string) time.Time {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container && s.State.Running != nil {
			return s.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}

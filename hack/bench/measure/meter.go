// The meter of CPU seconds and API requests over a workload's measured
// phases.

package measure

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"flotilla.io/flotilla/test/testworld"
)

// A Meter sums what flotilla-node and the control planes spend over the
// measured phases of a workload (a scenario marks them with Start and
// Stop): flotilla-node's CPU seconds and the apiservers' request counters,
// each phase running on for --settle after its last pod so that trailing
// work counts. Idle windows between phases sample flotilla-node with
// nothing to do.

// Roles of the clusters a meter scrapes.
const (
	RoleHost   = "host"
	RoleMember = "member"
)

// meteredProcess is one process whose CPU time a meter follows.
type meteredProcess struct {
	label string // role/component or flotilla-node; equal labels are summed
	pid   int
}

// Meter samples the clusters involved in a mode and flotilla-node: CPU
// seconds from /proc/<pid>/stat, apiserver_request_total from each
// apiserver.
type Meter struct {
	clusters map[string][]*testworld.Cluster // by role
	procs    []meteredProcess
	nodes    map[string]int // flotilla-node pid by member
	metrics  []string       // flotilla-nodes' /metrics addresses
	now      func() time.Time

	begin    *snapshot
	requests map[string]RequestCounts // by role, summed over phases
	nodeReqs RequestCounts            // flotilla-node's own, by "apiserver VERB resource", summed over phases
	nodeFail RequestCounts            // those of nodeReqs that failed, by "apiserver VERB resource code"
	cpu      map[string]float64       // by label, summed over phases
	nodeCPU  map[string]float64       // flotilla-node CPU seconds by phase
	phases   time.Duration
}

// snapshot is the meter's reading at one moment.
type snapshot struct {
	at       time.Time
	requests map[string]RequestCounts
	nodeReqs RequestCounts
	nodeFail RequestCounts
	cpu      map[string]float64
	nodes    map[string]ProcSample
}

// Metered is what a meter follows: the clusters by role (RoleHost,
// RoleMember), whose processes' CPU and apiservers' requests it reads, and
// the flotilla-nodes.
type Metered struct {
	Clusters map[string][]*testworld.Cluster
	Nodes    []Node
}

// Node is a running flotilla-node as a meter reads it.
type Node struct {
	Member  string
	PID     int
	Metrics string // its /metrics address
}

// NewMeter returns a meter of what w names, with no phase measured yet.
func NewMeter(w Metered) *Meter {
	m := &Meter{clusters: map[string][]*testworld.Cluster{}, nodes: map[string]int{}, now: time.Now}
	for _, role := range []string{RoleHost, RoleMember} {
		for _, c := range w.Clusters[role] {
			m.clusters[role] = append(m.clusters[role], c)
			for comp, p := range ClusterProcesses(c) {
				m.procs = append(m.procs, meteredProcess{role + "/" + comp, p.Pid()})
			}
		}
	}
	for _, n := range w.Nodes {
		m.nodes[n.Member] = n.PID
		m.procs = append(m.procs, meteredProcess{"flotilla-node", n.PID})
		m.metrics = append(m.metrics, n.Metrics)
	}
	m.Reset()
	return m
}

// ClusterProcesses returns the processes a cluster runs, by component.
func ClusterProcesses(c *testworld.Cluster) map[string]*testworld.Process {
	out := map[string]*testworld.Process{}
	for _, comp := range []string{testworld.ComponentEtcd, testworld.ComponentAPIServer,
		testworld.ComponentControllerManager, testworld.ComponentScheduler, testworld.ComponentKwok} {
		if p := c.Process(comp); p != nil {
			out[comp] = p
		}
	}
	return out
}

// Requests are the requests the apiservers of role served over the
// measured phases.
func (m *Meter) Requests(role string) RequestCounts { return m.requests[role] }

// CPU is the CPU seconds of the processes labelled label (role/component,
// or flotilla-node) over the measured phases.
func (m *Meter) CPU(label string) float64 { return m.cpu[label] }

// Phases is how long the measured phases took together.
func (m *Meter) Phases() time.Duration { return m.phases }

// NodePIDs are the flotilla-nodes' process ids, by member.
func (m *Meter) NodePIDs() map[string]int { return maps.Clone(m.nodes) }

// Reset forgets the phases measured so far, for the next run.
func (m *Meter) Reset() {
	m.begin = nil
	m.requests = map[string]RequestCounts{}
	m.nodeReqs = RequestCounts{}
	m.nodeFail = RequestCounts{}
	m.cpu = map[string]float64{}
	m.nodeCPU = map[string]float64{}
	m.phases = 0
}

func (m *Meter) take(ctx context.Context) (*snapshot, error) {
	s := &snapshot{at: m.now(), requests: map[string]RequestCounts{}, nodeReqs: RequestCounts{}, nodeFail: RequestCounts{},
		cpu: map[string]float64{}, nodes: map[string]ProcSample{}}
	for _, addr := range m.metrics {
		rc, failed, err := ScrapeNodeRequests(ctx, addr)
		if err != nil {
			return nil, fmt.Errorf("scrape flotilla-node at %s: %w", addr, err)
		}
		s.nodeReqs.Add(rc)
		s.nodeFail.Add(failed)
	}
	for _, p := range m.procs {
		ps, err := ReadProc(p.pid)
		if err != nil {
			return nil, fmt.Errorf("sample %s: %w", p.label, err)
		}
		s.cpu[p.label] += ps.CPUSeconds
	}
	for member, pid := range m.nodes {
		ps, err := ReadProc(pid)
		if err != nil {
			return nil, fmt.Errorf("sample flotilla-node of %s: %w", member, err)
		}
		s.nodes[member] = ps
	}
	for role, cs := range m.clusters {
		s.requests[role] = RequestCounts{}
		for _, c := range cs {
			rc, err := ScrapeRequests(ctx, c.Client())
			if err != nil {
				return nil, fmt.Errorf("scrape %s: %w", c.Name, err)
			}
			s.requests[role].Add(rc)
		}
	}
	return s, nil
}

// Start begins a measured phase. A nil meter measures nothing, for
// workloads that are not measured (warm-up).
func (m *Meter) Start(ctx context.Context) error {
	if m == nil {
		return nil
	}
	s, err := m.take(ctx)
	m.begin = s
	return err
}

// Stop ends the phase begun by Start and adds it to the totals.
func (m *Meter) Stop(ctx context.Context, phase string) error {
	if m == nil {
		return nil
	}
	if m.begin == nil {
		return errors.New("meter: stop without start")
	}
	end, err := m.take(ctx)
	if err != nil {
		return err
	}
	for role, rc := range end.requests {
		if m.requests[role] == nil {
			m.requests[role] = RequestCounts{}
		}
		m.requests[role].Add(rc.Sub(m.begin.requests[role]))
	}
	m.nodeReqs.Add(end.nodeReqs.Sub(m.begin.nodeReqs))
	m.nodeFail.Add(end.nodeFail.Sub(m.begin.nodeFail))
	for label, v := range end.cpu {
		m.cpu[label] += v - m.begin.cpu[label]
	}
	for member, ps := range end.nodes {
		m.nodeCPU[phase] += ps.CPUSeconds - m.begin.nodes[member].CPUSeconds
	}
	m.phases += end.at.Sub(m.begin.at)
	m.begin = nil
	return nil
}

// Settle lets a measured phase run on for d after its workload is done:
// what flotilla-node still does then (status it has queued, events it is
// still writing) is part of the phase's cost.
func (m *Meter) Settle(ctx context.Context, d time.Duration) error {
	if m == nil {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d): // a measurement window, not a wait for a condition
	}
	return nil
}

// Report adds per-pod costs of the measured phases to s.
func (m *Meter) Report(s Sample, pods int) {
	if m == nil || pods == 0 {
		return
	}
	perPod := func(v float64) float64 { return v / float64(pods) }
	var writes, reads float64
	for role, rc := range m.requests {
		cls := rc.ByClass()
		s["api."+role+".writes_per_pod"] = perPod(cls[ClassWrite])
		s["api."+role+".reads_per_pod"] = perPod(cls[ClassRead])
		writes += cls[ClassWrite]
		reads += cls[ClassRead]
		var terminated float64
		for k, v := range rc {
			s["api_detail."+role+"."+k] = perPod(v)
			if verb, _, _ := strings.Cut(k, " "); verb == verbTerminated {
				terminated += v
			}
		}
		s["api."+role+".watches_terminated_per_1000_pods"] = perPod(terminated) * 1000
	}
	if len(m.metrics) > 0 {
		// flotilla-node's own requests, as it counts them. Its host status
		// writes and the final deletes of host pods stand in for the
		// kubelet a native cluster's pods have; the rest — member pod
		// creates and deletes, mirrored events, anything else — is what
		// forwarding adds.
		var nodeWrites, kubeletWrites float64
		for k, v := range m.nodeReqs {
			s["node_api."+k] = perPod(v)
			apiserver, key, _ := strings.Cut(k, " ")
			if verb, _, _ := strings.Cut(key, " "); ClassOf(verb) != ClassWrite {
				continue
			}
			s["node_api."+apiserver+".writes_per_pod"] += perPod(v)
			nodeWrites += v
			if apiserver == RoleHost && (key == RequestKey("PUT", "pods", "status") || key == RequestKey("DELETE", "pods", "")) {
				kubeletWrites += v
			}
		}
		// Counted among them, the attempts that failed, by code.
		for k, v := range m.nodeFail {
			s["node_api_failed."+k] = perPod(v)
		}
		s["node_api.writes_per_pod"] = perPod(nodeWrites)
		s["node_api.extra_writes_per_pod"] = perPod(nodeWrites - kubeletWrites)
	}
	s["api.writes_per_pod"] = perPod(writes)
	s["api.reads_per_pod"] = perPod(reads)
	var total float64
	for label, v := range m.cpu {
		s["cpu."+label+"_s"] = v
		total += v
	}
	s["cpu.total_per_1000_pods_s"] = perPod(total) * 1000
	if len(m.nodes) > 0 {
		s["footprint.node_cpu_per_1000_pods_s"] = perPod(m.cpu["flotilla-node"]) * 1000
		for phase, v := range m.nodeCPU {
			s["footprint.node_cpu_"+phase+"_per_1000_pods_s"] = perPod(v) * 1000
		}
	}
}

// Idle samples flotilla-node over a window in which nothing is asked of
// it: CPU as millicores (summed over all flotilla-nodes), RSS at its end
// (the largest flotilla-node's, and the sum) and the API requests per
// second all clusters serve.
func (m *Meter) Idle(ctx context.Context, window time.Duration, prefix string, s Sample) error {
	if m == nil || len(m.nodes) == 0 {
		return nil
	}
	a, err := m.take(ctx)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(window): // a measurement window, not a wait for a condition
	}
	b, err := m.take(ctx)
	if err != nil {
		return err
	}
	elapsed := b.at.Sub(a.at).Seconds()
	var cpu, rss, file, sum float64
	for member, bs := range b.nodes {
		cpu += bs.CPUSeconds - a.nodes[member].CPUSeconds
		if r := float64(bs.RSSBytes) / (1 << 20); r > rss {
			rss, file = r, float64(bs.FileBytes)/(1<<20)
		}
		sum += float64(bs.RSSBytes) / (1 << 20)
	}
	var requests float64
	for role, rc := range b.requests {
		d := rc.Sub(a.requests[role])
		cls := d.ByClass()
		requests += cls[ClassWrite] + cls[ClassRead]
		for k, v := range d {
			s["api_detail_"+prefix+"_per_s."+role+"."+k] = v / elapsed
		}
		// The first scrape of every apiserver is a request itself (the
		// second is counted only after it has answered).
		s["footprint."+prefix+"_"+role+"_api_requests_per_s"] = max(0, cls[ClassWrite]+cls[ClassRead]-float64(len(m.clusters[role]))) / elapsed
	}
	s["footprint."+prefix+"_node_millicores"] = cpu / elapsed * 1000
	s["footprint."+prefix+"_node_rss_mib"] = rss
	s["footprint."+prefix+"_node_rss_file_mib"] = file
	s["footprint."+prefix+"_node_rss_sum_mib"] = sum
	s["footprint."+prefix+"_api_requests_per_s"] = max(0, requests-float64(m.apiservers())) / elapsed
	return nil
}

func (m *Meter) apiservers() int {
	n := 0
	for _, cs := range m.clusters {
		n += len(cs)
	}
	return n
}

// Memory adds the largest flotilla-node's current and peak RSS to s, and
// the current RSS of all of them.
func (m *Meter) Memory(prefix string, s Sample) error {
	if m == nil || len(m.nodes) == 0 {
		return nil
	}
	var rss, sum, hwm float64
	for member, pid := range m.nodes {
		ps, err := ReadProc(pid)
		if err != nil {
			return fmt.Errorf("sample flotilla-node of %s: %w", member, err)
		}
		rss = max(rss, float64(ps.RSSBytes)/(1<<20))
		sum += float64(ps.RSSBytes) / (1 << 20)
		hwm = max(hwm, float64(ps.HWMBytes)/(1<<20))
	}
	s["footprint."+prefix+"_node_rss_mib"] = rss
	s["footprint."+prefix+"_node_rss_sum_mib"] = sum
	// The kernel updates VmHWM lazily, so it may trail an RSS read earlier.
	s["footprint.node_peak_rss_mib"] = max(hwm, rss, s["footprint.node_peak_rss_mib"])
	return nil
}

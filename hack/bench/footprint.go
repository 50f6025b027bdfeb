package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"flotilla.io/flotilla/test/testworld"
)

// The footprint scenario: what flotilla-node and the control planes spend.
// It rides on the burst (see burst.go), which marks its phases on a meter:
// flotilla-node's CPU seconds and the apiservers' request counters are
// summed over the create and delete phases only (each running on for
// --settle after its last pod, so that trailing work counts), and idle
// windows between them sample flotilla-node with nothing to do.

// Roles of the clusters a meter scrapes.
const (
	roleHost   = "host"
	roleMember = "member"
)

// meteredProcess is one process whose CPU time a meter follows.
type meteredProcess struct {
	label string // role/component or flotilla-node; equal labels are summed
	pid   int
}

// meter samples the clusters involved in a mode and flotilla-node: CPU
// seconds from /proc/<pid>/stat, apiserver_request_total from each
// apiserver.
type meter struct {
	clusters map[string][]*testworld.Cluster // by role
	procs    []meteredProcess
	nodes    map[string]int // flotilla-node pid by member
	metrics  []string       // flotilla-nodes' /metrics addresses
	now      func() time.Time

	begin    *snapshot
	requests map[string]requestCounts // by role, summed over phases
	nodeReqs requestCounts            // flotilla-node's own, by "apiserver VERB resource", summed over phases
	nodeFail requestCounts            // those of nodeReqs that failed, by "apiserver VERB resource code"
	cpu      map[string]float64       // by label, summed over phases
	nodeCPU  map[string]float64       // flotilla-node CPU seconds by phase
	phases   time.Duration
}

// snapshot is the meter's reading at one moment.
type snapshot struct {
	at       time.Time
	requests map[string]requestCounts
	nodeReqs requestCounts
	nodeFail requestCounts
	cpu      map[string]float64
	nodes    map[string]procSample
}

func newMeter(t *target) *meter {
	m := &meter{clusters: map[string][]*testworld.Cluster{}, nodes: map[string]int{}, now: time.Now}
	add := func(role string, c *testworld.Cluster) {
		m.clusters[role] = append(m.clusters[role], c)
		for comp, p := range clusterProcesses(c) {
			m.procs = append(m.procs, meteredProcess{role + "/" + comp, p.Pid()})
		}
	}
	switch t.mode {
	case modeNative:
		add(roleHost, t.user)
	case modeDirect:
		// The world's host is idle and not part of this mode.
		add(roleMember, t.user)
	case modeFlotilla:
		add(roleHost, t.world.Host())
		for _, c := range t.members {
			add(roleMember, c)
			pid := t.fleet.Node(c.Name).Pid()
			m.nodes[c.Name] = pid
			m.procs = append(m.procs, meteredProcess{"flotilla-node", pid})
		}
		for i := range t.world.Members() {
			m.metrics = append(m.metrics, metricsAddress(i))
		}
	}
	m.reset()
	return m
}

// reset forgets the phases measured so far, for the next run.
func (m *meter) reset() {
	m.begin = nil
	m.requests = map[string]requestCounts{}
	m.nodeReqs = requestCounts{}
	m.nodeFail = requestCounts{}
	m.cpu = map[string]float64{}
	m.nodeCPU = map[string]float64{}
	m.phases = 0
}

func (m *meter) take(ctx context.Context) (*snapshot, error) {
	s := &snapshot{at: m.now(), requests: map[string]requestCounts{}, nodeReqs: requestCounts{}, nodeFail: requestCounts{},
		cpu: map[string]float64{}, nodes: map[string]procSample{}}
	for _, addr := range m.metrics {
		rc, failed, err := scrapeNodeRequests(ctx, addr)
		if err != nil {
			return nil, fmt.Errorf("scrape flotilla-node at %s: %w", addr, err)
		}
		s.nodeReqs.add(rc)
		s.nodeFail.add(failed)
	}
	for _, p := range m.procs {
		ps, err := readProc(p.pid)
		if err != nil {
			return nil, fmt.Errorf("sample %s: %w", p.label, err)
		}
		s.cpu[p.label] += ps.CPUSeconds
	}
	for member, pid := range m.nodes {
		ps, err := readProc(pid)
		if err != nil {
			return nil, fmt.Errorf("sample flotilla-node of %s: %w", member, err)
		}
		s.nodes[member] = ps
	}
	for role, cs := range m.clusters {
		s.requests[role] = requestCounts{}
		for _, c := range cs {
			rc, err := scrapeRequests(ctx, c.Client())
			if err != nil {
				return nil, fmt.Errorf("scrape %s: %w", c.Name, err)
			}
			s.requests[role].add(rc)
		}
	}
	return s, nil
}

// start begins a measured phase. A nil meter measures nothing, for
// workloads that are not measured (warm-up).
func (m *meter) start(ctx context.Context) error {
	if m == nil {
		return nil
	}
	s, err := m.take(ctx)
	m.begin = s
	return err
}

// stop ends the phase begun by start and adds it to the totals.
func (m *meter) stop(ctx context.Context, phase string) error {
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
			m.requests[role] = requestCounts{}
		}
		m.requests[role].add(rc.sub(m.begin.requests[role]))
	}
	m.nodeReqs.add(end.nodeReqs.sub(m.begin.nodeReqs))
	m.nodeFail.add(end.nodeFail.sub(m.begin.nodeFail))
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

// settle lets a measured phase run on for d after its workload is done:
// what flotilla-node still does then (status it has queued, events it is
// still writing) is part of the phase's cost.
func (m *meter) settle(ctx context.Context, d time.Duration) error {
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

// report adds per-pod costs of the measured phases to s.
func (m *meter) report(s sample, pods int) {
	if m == nil || pods == 0 {
		return
	}
	perPod := func(v float64) float64 { return v / float64(pods) }
	var writes, reads float64
	for role, rc := range m.requests {
		cls := rc.byClass()
		s["api."+role+".writes_per_pod"] = perPod(cls[classWrite])
		s["api."+role+".reads_per_pod"] = perPod(cls[classRead])
		writes += cls[classWrite]
		reads += cls[classRead]
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
			if verb, _, _ := strings.Cut(key, " "); classOf(verb) != classWrite {
				continue
			}
			s["node_api."+apiserver+".writes_per_pod"] += perPod(v)
			nodeWrites += v
			if apiserver == roleHost && (key == requestKey("PUT", "pods", "status") || key == requestKey("DELETE", "pods", "")) {
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

// idle samples flotilla-node over a window in which nothing is asked of
// it: CPU as millicores (summed over all flotilla-nodes), RSS at its end
// (the largest flotilla-node's, and the sum) and the API requests per
// second all clusters serve.
func (m *meter) idle(ctx context.Context, window time.Duration, prefix string, s sample) error {
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
		d := rc.sub(a.requests[role])
		cls := d.byClass()
		requests += cls[classWrite] + cls[classRead]
		for k, v := range d {
			s["api_detail_"+prefix+"_per_s."+role+"."+k] = v / elapsed
		}
		// The first scrape of every apiserver is a request itself (the
		// second is counted only after it has answered).
		s["footprint."+prefix+"_"+role+"_api_requests_per_s"] = max(0, cls[classWrite]+cls[classRead]-float64(len(m.clusters[role]))) / elapsed
	}
	s["footprint."+prefix+"_node_millicores"] = cpu / elapsed * 1000
	s["footprint."+prefix+"_node_rss_mib"] = rss
	s["footprint."+prefix+"_node_rss_file_mib"] = file
	s["footprint."+prefix+"_node_rss_sum_mib"] = sum
	s["footprint."+prefix+"_api_requests_per_s"] = max(0, requests-float64(m.apiservers())) / elapsed
	return nil
}

func (m *meter) apiservers() int {
	n := 0
	for _, cs := range m.clusters {
		n += len(cs)
	}
	return n
}

// memory adds the largest flotilla-node's current and peak RSS to s, and
// the current RSS of all of them.
func (m *meter) memory(prefix string, s sample) error {
	if m == nil || len(m.nodes) == 0 {
		return nil
	}
	var rss, sum, hwm float64
	for member, pid := range m.nodes {
		ps, err := readProc(pid)
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

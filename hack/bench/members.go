package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// The members scenario (issue 17, item 5): many members, one flotilla-node
// each. What a member costs the host while nothing happens, and whether a
// burst spread over all of them keeps up with a single cluster of as many
// nodes. It runs once per invocation, after the modes, in two worlds of its
// own:
//
//  1. native: a host with --members-count × --nodes-per-cluster kwok nodes
//     and no flotilla; --runs bursts of --replicas pods (a Deployment to
//     all Ready, then scaled to zero until all are gone), as the burst
//     scenario runs them;
//  2. flotilla: a host and --members-count members, each a cluster of its
//     own with --nodes-per-cluster kwok nodes. Every member runs what every
//     test world's cluster runs: its own etcd, kube-apiserver,
//     kube-controller-manager, kube-scheduler and kwok (nothing shared
//     between members). flotilla's roles are granted and its CRDs
//     installed, then
//     a. the host apiserver's open watches, once they have stayed the same
//     for longer than the controller-manager's discovery takes to watch
//     the CRDs, and its requests per second over --members-idle, with no
//     flotilla-node running;
//     b. one flotilla-node per member started at once (member health
//     checked at flotilla-node's default interval, as deployed), until
//     every virtual node is Ready; the open watches once settled again,
//     and after --settle the requests per second over --members-idle,
//     with every flotilla-node's CPU, RSS and its own count of the
//     requests it made;
//     c. --runs bursts of --replicas pods spread evenly over the virtual
//     nodes (maxSkew 1 on flotilla.io/cluster), as in native.
//
// What a member adds to the idle host is the difference between b and a
// divided by the members; the burst ratio is flotilla's median over
// native's, of the time until all pods are Ready and of the CPU seconds of
// every process of the world.
//
// The test world starts all clusters at once. On a machine of 2 CPUs and
// 24 GiB, 20 full members with 3 nodes each start in about 35 s, take
// about 6 GiB and, idle, 0.4 of a CPU, so no member component is left out
// or shared. During the burst, though, the members' control planes spend
// on the same two CPUs what separate machines would: the table shows each
// kind of process's CPU seconds, and the host's with the flotilla-nodes'
// against the native host's.

// membersQuietPerMember is how many writes per second above quietWrites
// the host may take per member and still be quiet: flotilla-node's lease
// and node status, well above what a quiet one writes (its target is half
// a request a second, reads included).
const membersQuietPerMember = 0.5

// membersStartTimeout bounds the start of the flotilla world: every
// cluster starts at once, and 21 control planes on two CPUs take minutes.
const membersStartTimeout = 15 * time.Minute

// membersResult is what the members scenario measured.
type membersResult struct {
	Members         int `json:"members"`
	NodesPerCluster int `json:"nodesPerCluster"`
	Replicas        int `json:"replicas"`
	// Idle is measured once in the flotilla world, before and after the
	// flotilla-nodes start (members.* and members_detail.*).
	Idle sample `json:"idle"`
	// Native and Flotilla are the bursts' runs and medians.
	Native   *modeResult `json:"native"`
	Flotilla *modeResult `json:"flotilla"`
	// Ratios are flotilla's burst medians over native's.
	Ratios map[string]float64 `json:"ratios,omitempty"`
	// Targets are issue 17's targets for many members.
	Targets    map[string]targetCheck `json:"targets,omitempty"`
	LoadBefore string                 `json:"loadBefore"`
	LoadAfter  string                 `json:"loadAfter"`
	Error      string                 `json:"error,omitempty"`
}

// targetCheck is one measured figure against its limit.
type targetCheck struct {
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	Met   bool    `json:"met"`
}

// Issue 17's targets at 20 members.
const (
	targetIdleRequestsPerMember = 0.5
	targetBurstRatio            = 1.6
)

// membersOptions are o as the members scenario's worlds see them:
// --members-count members, and every node with room for the whole burst.
func membersOptions(o *options) *options {
	mo := *o
	mo.members = o.membersCount
	mo.scenarios = "burst"
	return &mo
}

// runMembers runs the members scenario in worlds of its own under dir. The
// result holds whatever was measured, also when it fails.
func runMembers(ctx context.Context, o *options, bin testworld.Bin, nodeBinary, dir string, logf func(string, ...any)) (*membersResult, error) {
	res := &membersResult{Members: o.membersCount, NodesPerCluster: o.nodesPerCluster, Replicas: o.replicas,
		Idle: sample{}, Native: &modeResult{}, Flotilla: &modeResult{}, LoadBefore: loadAverage()}
	defer func() {
		res.LoadAfter = loadAverage()
		res.finish()
	}()
	mo := membersOptions(o)
	var errs []error
	if err := membersNative(ctx, mo, bin, nodeBinary, filepath.Join(dir, "native"), res.Native, logf); err != nil {
		res.Native.Error = err.Error()
		errs = append(errs, fmt.Errorf("native: %w", err))
	}
	if ctx.Err() == nil {
		if err := membersFlotilla(ctx, mo, bin, nodeBinary, filepath.Join(dir, "flotilla"), res, logf); err != nil {
			res.Flotilla.Error = err.Error()
			errs = append(errs, fmt.Errorf("flotilla: %w", err))
		}
	}
	return res, errors.Join(errs...)
}

// membersNative runs the bursts on a host with as many kwok nodes as all
// members together.
func membersNative(ctx context.Context, o *options, bin testworld.Bin, nodeBinary, dir string, mr *modeResult, logf func(string, ...any)) error {
	logf("members: native, a host with %d kwok nodes", o.members*o.nodesPerCluster)
	t, err := startTarget(ctx, modeNative, o, bin, nodeBinary, dir, logf)
	if err != nil {
		return err
	}
	defer func() {
		if err := t.world.Stop(); err != nil {
			logf("members: native: %v", err)
		}
	}()
	return membersBursts(ctx, t, mr, nil)
}

// membersFlotilla measures the host idle without and with a flotilla-node
// per member, then runs the bursts spread over all virtual nodes.
func membersFlotilla(ctx context.Context, o *options, bin testworld.Bin, nodeBinary, dir string, res *membersResult, logf func(string, ...any)) error {
	cfg := worldConfig(modeFlotilla, o, bin, dir, logf)
	cfg.StartTimeout = membersStartTimeout
	logf("members: flotilla, a host and %d members with %d kwok nodes each", o.members, o.nodesPerCluster)
	began := time.Now()
	w, err := testworld.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := w.Stop(); err != nil {
			logf("members: flotilla: %v", err)
		}
	}()
	idle := res.Idle
	idle["world.start_s"] = seconds(time.Since(began))
	// The fleet checks members every second so that member-loss tests are
	// quick; this scenario runs flotilla-node's default, as deployed (a
	// --node-arg still wins).
	nodeArgs := append([]string{"--member-health-interval=" + scaleHealthInterval.String()}, o.nodeArgs...)
	f, err := fleet.DeployOnly(ctx, w, nodeBinary, nil, nodeArgs...)
	if err != nil {
		return fmt.Errorf("grant flotilla its roles: %w", err)
	}
	host, members := w.Host(), w.Members()
	if _, err := createNamespace(ctx, host, benchNamespace); err != nil {
		return err
	}

	// The controller-manager starts watching the CRDs the fleet installed
	// only when its discovery next looks.
	hostOnly := []*testworld.Cluster{host}
	withoutLoad, err := settledLoad(ctx, hostOnly, discoveryResync+5*time.Second, 3*time.Minute)
	if err != nil {
		return fmt.Errorf("host watches without flotilla-node: %w", err)
	}
	withoutMember, err := memberWatches(ctx, members)
	if err != nil {
		return err
	}
	logf("members: host idle without flotilla-node, %s", o.membersIdle)
	without, err := observeIdle(ctx, host, nil, o.membersIdle)
	if err != nil {
		return err
	}

	logf("members: starting %d flotilla-nodes", len(members))
	start := time.Now()
	nodes := map[string]nodeProc{}
	for i, m := range members {
		p, err := f.StartNode(m.Name, "--metrics-bind-address="+metricsAddress(i))
		if err != nil {
			return err
		}
		nodes[m.Name] = nodeProc{pid: p.Pid(), metrics: metricsAddress(i)}
	}
	for _, m := range members {
		if err := f.WaitNodeReady(ctx, m.Name, o.phaseTimeout); err != nil {
			return err
		}
	}
	idle["members.nodes_ready_s"] = seconds(time.Since(start))
	logf("members: %d virtual nodes Ready %.1fs after start", len(members), idle["members.nodes_ready_s"])
	withLoad, err := settledLoad(ctx, hostOnly, settleQuiet, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("host watches with flotilla-node: %w", err)
	}
	withMember, err := memberWatches(ctx, members)
	if err != nil {
		return err
	}
	// What starting wrote (node status, leases taken) drains first.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.settle):
	}
	logf("members: host idle with %d flotilla-nodes, %s", len(members), o.membersIdle)
	with, err := observeIdle(ctx, host, nodes, o.membersIdle)
	if err != nil {
		return err
	}
	if idle["members.world_rss_idle_gib"], err = worldRSS(w, nodes); err != nil {
		return err
	}
	idle["members.mem_available_idle_gib"] = memAvailableGiB()
	deriveIdle(idle, len(members), without, with, idleWatches{
		hostWithout: withoutLoad[host.Name].watches, hostWith: withLoad[host.Name].watches,
		memberWithout: withoutMember, memberWith: withMember,
	})
	logf("members: host %.2f requests/s without flotilla-node, %.2f with %d (%.3f per member); watches %.0f, %.0f",
		idle["members.idle_host_api_requests_per_s_without"], idle["members.idle_host_api_requests_per_s_with"], len(members),
		idle["members.idle_host_api_requests_per_s_added_per_member"], idle["members.host_watches_without"], idle["members.host_watches_with"])

	t := &target{mode: modeFlotilla, opts: o, world: w, fleet: f, user: host, members: members, logf: logf, once: sample{},
		quietExtra: map[string]float64{host.Name: float64(len(members)) * membersQuietPerMember}}
	t.meter = newMeter(t)
	if err := t.prepareNamespace(ctx); err != nil {
		return err
	}
	return membersBursts(ctx, t, res.Flotilla, spreadOverVirtualNodes)
}

// membersBursts runs --runs bursts on t, each after the world is quiet,
// adding each run's sample to mr.
func membersBursts(ctx context.Context, t *target, mr *modeResult, shape func(*appsv1.Deployment)) error {
	for run := 1; run <= t.opts.runs; run++ {
		s := sample{}
		if err := t.quiesce(ctx, "burst", s); err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		t.meter.reset()
		logs := t.markLogs()
		ready := func(_, _ podWatches) error {
			nodes := map[string]nodeProc{}
			for member, pid := range t.meter.nodes {
				nodes[member] = nodeProc{pid: pid}
			}
			rss, err := worldRSS(t.world, nodes)
			s["members.world_rss_loaded_gib"] = rss
			s["members.mem_available_loaded_gib"] = memAvailableGiB()
			return err
		}
		got, err := runDeployment(ctx, t, "burst-"+strconv.Itoa(run), t.opts.replicas, t.meter, workloadHooks{shape: shape, ready: ready})
		if err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		t.countLogs(logs, "burst", s)
		maps.Copy(s, got)
		t.meter.report(s, t.opts.replicas)
		addBurstRates(s, t.meter.requests[roleHost], t.meter.phases)
		mr.Runs = append(mr.Runs, s.clean())
		t.logf("members: %s run %d: ready %.2fs, deleted %.2fs, host %.0f requests/s", t.mode, run,
			s["burst.ready_s"], s["delete.gone_s"], s["members.burst_host_api_requests_per_s"])
	}
	return nil
}

// addBurstRates adds the host apiserver's requests per second over the
// burst's measured phases (create and delete, each with its --settle).
func addBurstRates(s sample, host requestCounts, phases time.Duration) {
	secs := phases.Seconds()
	if secs <= 0 {
		return
	}
	var all float64
	for _, v := range host {
		all += v
	}
	cls := host.byClass()
	s["members.burst_host_api_requests_per_s"] = all / secs
	s["members.burst_host_api_writes_per_s"] = cls[classWrite] / secs
	s["members.burst_host_api_reads_per_s"] = cls[classRead] / secs
	s["members.burst_measured_s"] = secs
}

// worldRSS is the resident memory of every process of the world's
// clusters and of the flotilla-nodes, in GiB. Pages the processes share
// (21 kube-apiservers' text, say) count once per process, so it is more
// than the machine gives them: the available memory read alongside tells
// that.
func worldRSS(w *testworld.World, nodes map[string]nodeProc) (float64, error) {
	var pids []int
	for _, c := range w.Clusters() {
		for _, p := range clusterProcesses(c) {
			pids = append(pids, p.Pid())
		}
	}
	for _, n := range nodes {
		pids = append(pids, n.pid)
	}
	var sum int64
	for _, pid := range pids {
		ps, err := readProc(pid)
		if err != nil {
			return 0, err
		}
		sum += ps.RSSBytes
	}
	return float64(sum) / (1 << 30), nil
}

// memberWatches reads the open watches of every member's apiserver, by
// member.
func memberWatches(ctx context.Context, members []*testworld.Cluster) (map[string]float64, error) {
	out := map[string]float64{}
	for _, c := range members {
		l, err := scrapeLoad(ctx, c.Client())
		if err != nil {
			return nil, fmt.Errorf("watches of %s: %w", c.Name, err)
		}
		out[c.Name] = l.watches.total()
	}
	return out, nil
}

// nodeProc is a running flotilla-node: its process and /metrics address.
type nodeProc struct {
	pid     int
	metrics string
}

// idleReading is what observeIdle saw over one window.
type idleReading struct {
	elapsed float64 // seconds
	// host is the host apiserver's requests over the window, without the
	// reading's own scrape.
	host requestCounts
	// nodeReqs are the flotilla-nodes' own counts of their requests,
	// summed, keyed "apiserver VERB resource".
	nodeReqs requestCounts
	// nodeCPU is each flotilla-node's CPU seconds over the window and
	// nodeRSS its RSS at the end (MiB), by member.
	nodeCPU, nodeRSS map[string]float64
}

// isMetricsScrape reports whether a key of apiserver_request_total counts
// the scrapes of /metrics: non-resource requests carry their path where
// resource requests have their subresource.
func isMetricsScrape(key string) bool {
	return strings.HasPrefix(key, requestKey("GET", "", "")) && strings.HasSuffix(key, "metrics")
}

// observeIdle reads the host apiserver's request counters and the
// flotilla-nodes' CPU, RSS and request counters, waits window and reads
// them again.
func observeIdle(ctx context.Context, host *testworld.Cluster, nodes map[string]nodeProc, window time.Duration) (idleReading, error) {
	type reading struct {
		at       time.Time
		host     requestCounts
		nodeReqs requestCounts
		procs    map[string]procSample
	}
	read := func() (reading, error) {
		r := reading{nodeReqs: requestCounts{}, procs: map[string]procSample{}}
		for member, n := range nodes {
			rc, _, err := scrapeNodeRequests(ctx, n.metrics)
			if err != nil {
				return r, fmt.Errorf("scrape flotilla-node of %s: %w", member, err)
			}
			r.nodeReqs.add(rc)
			if r.procs[member], err = readProc(n.pid); err != nil {
				return r, fmt.Errorf("flotilla-node of %s: %w", member, err)
			}
		}
		rc, err := scrapeRequests(ctx, host.Client())
		if err != nil {
			return r, fmt.Errorf("scrape %s: %w", host.Name, err)
		}
		r.host, r.at = rc, time.Now()
		return r, nil
	}
	a, err := read()
	if err != nil {
		return idleReading{}, err
	}
	select {
	case <-ctx.Done():
		return idleReading{}, ctx.Err()
	case <-time.After(window): // a measurement window, not a wait for a condition
	}
	b, err := read()
	if err != nil {
		return idleReading{}, err
	}
	ir := idleReading{elapsed: b.at.Sub(a.at).Seconds(), host: b.host.sub(a.host), nodeReqs: b.nodeReqs.sub(a.nodeReqs),
		nodeCPU: map[string]float64{}, nodeRSS: map[string]float64{}}
	dropScrape(ir.host)
	for member, ps := range b.procs {
		ir.nodeCPU[member] = ps.CPUSeconds - a.procs[member].CPUSeconds
		ir.nodeRSS[member] = float64(ps.RSSBytes) / (1 << 20)
	}
	return ir, nil
}

// dropScrape leaves the first of a window's two scrapes of /metrics out of
// the window's requests: the apiserver counts it once answered, so the
// second reading has it.
func dropScrape(rc requestCounts) {
	for k, v := range rc {
		if isMetricsScrape(k) && v >= 1 {
			if rc[k] = v - 1; rc[k] == 0 {
				delete(rc, k)
			}
			return
		}
	}
}

// idleWatches are the open watches of the host by resource, and of every
// member in total by member, without and with the flotilla-nodes.
type idleWatches struct {
	hostWithout, hostWith     watchCounts
	memberWithout, memberWith map[string]float64
}

// deriveIdle adds to s what members members' flotilla-nodes add to the
// idle host: requests per second (all verbs, and writes and reads) and
// open watches, in total and per member, by verb and resource; the
// members' watches per member; and the flotilla-nodes' idle CPU and RSS,
// summed, per process and the largest.
func deriveIdle(s sample, members int, without, with idleReading, w idleWatches) {
	n := float64(members)
	rate := func(r idleReading) map[string]float64 {
		out := map[string]float64{}
		if r.elapsed <= 0 {
			return out
		}
		for k, v := range r.host {
			out[k] = v / r.elapsed
		}
		return out
	}
	before, after := rate(without), rate(with)
	total := func(rates map[string]float64, class requestClass) float64 {
		var t float64
		for k, v := range rates {
			verb, _, _ := strings.Cut(k, " ")
			if class == "" || classOf(verb) == class {
				t += v
			}
		}
		return t
	}
	for _, c := range []struct {
		suffix string
		class  requestClass
	}{{"requests", ""}, {"writes", classWrite}, {"reads", classRead}} {
		b, a := total(before, c.class), total(after, c.class)
		s["members.idle_host_api_"+c.suffix+"_per_s_without"] = b
		s["members.idle_host_api_"+c.suffix+"_per_s_with"] = a
		s["members.idle_host_api_"+c.suffix+"_per_s_added_per_member"] = zeroIfTiny((a - b) / n)
	}
	keys := map[string]bool{}
	for k, v := range before {
		keys[k] = true
		s["members_detail.idle_host_without_per_s."+k] = v
	}
	for k, v := range after {
		keys[k] = true
		s["members_detail.idle_host_with_per_s."+k] = v
	}
	for k := range keys {
		// A request made every so often is counted a different number
		// of times in windows of different lengths; what does not change
		// by a thousandth of a request a second per member did not change.
		if d := (after[k] - before[k]) / n; math.Abs(d) >= 0.001 {
			s["members_detail.idle_host_added_per_member_per_s."+k] = d
		}
	}
	if with.elapsed > 0 {
		var own float64
		for k, v := range with.nodeReqs {
			apiserver, key, _ := strings.Cut(k, " ")
			s["members_detail.idle_node_"+apiserver+"_requests_per_member_per_s."+key] = v / with.elapsed / n
			if apiserver == roleHost {
				own += v
			}
		}
		s["members.idle_node_host_requests_per_member_per_s"] = own / with.elapsed / n
	}

	s["members.host_watches_without"] = w.hostWithout.total()
	s["members.host_watches_with"] = w.hostWith.total()
	s["members.host_watches_added_per_member"] = (w.hostWith.total() - w.hostWithout.total()) / n
	for k, v := range w.hostWith.sub(w.hostWithout) {
		s["members_detail.host_watches_added_per_member."+k] = v / n
	}
	var mb, ma float64
	for _, v := range w.memberWithout {
		mb += v
	}
	for _, v := range w.memberWith {
		ma += v
	}
	s["members.member_watches_added_per_member"] = (ma - mb) / n

	if len(with.nodeCPU) > 0 && with.elapsed > 0 {
		var cpuSum, cpuMax, rssSum, rssMax float64
		for member, cpu := range with.nodeCPU {
			mc := cpu / with.elapsed * 1000
			cpuSum += mc
			cpuMax = max(cpuMax, mc)
			rssSum += with.nodeRSS[member]
			rssMax = max(rssMax, with.nodeRSS[member])
		}
		k := float64(len(with.nodeCPU))
		s["members.idle_node_millicores_sum"] = cpuSum
		s["members.idle_node_millicores_mean"] = cpuSum / k
		s["members.idle_node_millicores_max"] = cpuMax
		s["members.idle_node_rss_mib_sum"] = rssSum
		s["members.idle_node_rss_mib_mean"] = rssSum / k
		s["members.idle_node_rss_mib_max"] = rssMax
	}
}

// zeroIfTiny returns 0 for a difference too small to be a change (see
// deriveIdle), and v otherwise.
func zeroIfTiny(v float64) float64 {
	if math.Abs(v) < 0.001 {
		return 0
	}
	return v
}

// membersRows are the bursts' metrics printed, native against flotilla;
// those marked ratio have flotilla/native.
var membersRows = []row{
	{"burst: all pods Running+Ready (s)", "burst.ready_s", "%.2f", true},
	{"burst: all pods created (s)", "burst.created_s", "%.2f", true},
	{"burst: all pods scheduled (s)", "burst.scheduled_s", "%.2f", true},
	{"burst: pod startup p50 (s)", "burst.pod_startup_p50_s", "%.2f", true},
	{"burst: pod startup p99 (s)", "burst.pod_startup_p99_s", "%.2f", true},
	{"burst: all member pods Ready (s)", "burst.member_ready_s", "%.2f", false},
	{"burst: status lag member→host p99 (s)", "burst.status_lag_p99_s", "%.3f", false},
	{"burst: pods per node (virtual node), fewest", "members.pods_per_node_min", "%.0f", false},
	{"burst: pods per node (virtual node), most", "members.pods_per_node_max", "%.0f", false},
	{"delete: all pods gone (s)", "delete.gone_s", "%.2f", true},
	{"delete: all member pods gone (s)", "delete.member_gone_s", "%.2f", false},
	{"all processes: CPU-s per 1000 pods", "cpu.total_per_1000_pods_s", "%.1f", true},
	{"host apiserver CPU-s (create + delete)", "cpu.host/kube-apiserver_s", "%.1f", true},
	{"flotilla-nodes CPU-s (create + delete, sum)", "cpu.flotilla-node_s", "%.1f", false},
	{"member processes CPU-s (create + delete, sum)", "members.member_cpu_s", "%.1f", false},
	{"host apiserver requests/s, create + delete phases (each with --settle)", "members.burst_host_api_requests_per_s", "%.1f", true},
	{"host apiserver writes per pod", "api.host.writes_per_pod", "%.2f", true},
	{"host apiserver reads per pod", "api.host.reads_per_pod", "%.2f", true},
	{"flotilla-node peak RSS, largest (MiB)", "footprint.node_peak_rss_mib", "%.1f", false},
	{"flotilla-nodes RSS with the pods, sum (MiB)", "footprint.loaded_node_rss_sum_mib", "%.1f", false},
	{"host processes and flotilla-nodes CPU-s (create + delete)", "members.host_side_cpu_s", "%.1f", true},
	{"world's processes RSS summed, all pods Ready (GiB; shared pages once per process)", "members.world_rss_loaded_gib", "%.2f", true},
	{"machine memory available then (GiB)", "members.mem_available_loaded_gib", "%.1f", false},
	{"flotilla-node error lines (create + delete)", "burst.log_error_lines", "%.0f", false},
	{"flotilla-node warning lines (create + delete)", "burst.log_warning_lines", "%.0f", false},
}

// membersIdleRows are the flotilla world's idle metrics printed.
var membersIdleRows = []row{
	{"world start-up, all clusters Ready (s)", "world.start_s", "%.0f", false},
	{"all virtual nodes Ready after the flotilla-nodes start (s)", "members.nodes_ready_s", "%.1f", false},
	{"host apiserver requests/s idle, no flotilla-node", "members.idle_host_api_requests_per_s_without", "%.2f", false},
	{"host apiserver requests/s idle, all flotilla-nodes Ready", "members.idle_host_api_requests_per_s_with", "%.2f", false},
	{"host apiserver requests/s added per member", "members.idle_host_api_requests_per_s_added_per_member", "%.3f", false},
	{"host apiserver writes/s added per member", "members.idle_host_api_writes_per_s_added_per_member", "%.3f", false},
	{"host apiserver reads/s added per member", "members.idle_host_api_reads_per_s_added_per_member", "%.3f", false},
	{"host requests/s per member, as flotilla-node counts its own", "members.idle_node_host_requests_per_member_per_s", "%.3f", false},
	{"host open watches, no flotilla-node", "members.host_watches_without", "%.0f", false},
	{"host open watches, all flotilla-nodes Ready", "members.host_watches_with", "%.0f", false},
	{"host open watches added per member", "members.host_watches_added_per_member", "%.1f", false},
	{"member open watches added per member (its own apiserver)", "members.member_watches_added_per_member", "%.1f", false},
	{"flotilla-node idle CPU, sum (millicores)", "members.idle_node_millicores_sum", "%.1f", false},
	{"flotilla-node idle CPU, per process mean (millicores)", "members.idle_node_millicores_mean", "%.2f", false},
	{"flotilla-node idle CPU, largest (millicores)", "members.idle_node_millicores_max", "%.2f", false},
	{"flotilla-node idle RSS, sum (MiB)", "members.idle_node_rss_mib_sum", "%.0f", false},
	{"flotilla-node idle RSS, per process mean (MiB)", "members.idle_node_rss_mib_mean", "%.1f", false},
	{"flotilla-node idle RSS, largest (MiB)", "members.idle_node_rss_mib_max", "%.1f", false},
	{"world's processes RSS summed idle (GiB; shared pages once per process)", "members.world_rss_idle_gib", "%.2f", false},
	{"machine memory available then (GiB)", "members.mem_available_idle_gib", "%.1f", false},
}

// finish computes the medians, ratios and targets, and the figures derived
// from a run's sample.
func (r *membersResult) finish() {
	for _, mr := range []*modeResult{r.Native, r.Flotilla} {
		if mr == nil {
			continue
		}
		for _, s := range mr.Runs {
			deriveBurst(s)
		}
		mr.Median = medianSample(mr.Runs)
	}
	r.Ratios = map[string]float64{}
	for _, row := range membersRows {
		if !row.ratio {
			continue
		}
		if v := ratio(r.flotilla()[row.key], r.native(), row.key); v != 0 {
			r.Ratios[row.key] = v
		}
	}
	r.Targets = map[string]targetCheck{}
	check := func(name string, v float64, ok bool, limit float64) {
		if ok {
			r.Targets[name] = targetCheck{Value: v, Limit: limit, Met: v <= limit}
		}
	}
	v, ok := r.Idle["members.idle_host_api_requests_per_s_added_per_member"]
	check("idle_host_api_requests_per_s_added_per_member", v, ok, targetIdleRequestsPerMember)
	v, ok = r.Ratios["burst.ready_s"]
	check("burst_ready_ratio_vs_native", v, ok, targetBurstRatio)
}

// deriveBurst adds what a burst's sample says put together: the member
// processes' CPU seconds, the host's with the flotilla-nodes' (natively,
// the host's with its kwok), and the fewest and most pods any virtual node
// (any node, natively) ran.
func deriveBurst(s sample) {
	var memberCPU, hostCPU float64
	found, foundHost := false, false
	least, most := math.Inf(1), 0.0
	for k, v := range s {
		if strings.HasPrefix(k, "cpu."+roleMember+"/") && strings.HasSuffix(k, "_s") {
			memberCPU += v
			found = true
		}
		if (strings.HasPrefix(k, "cpu."+roleHost+"/") || k == "cpu.flotilla-node_s") && strings.HasSuffix(k, "_s") {
			hostCPU += v
			foundHost = true
		}
		if strings.HasPrefix(k, "spread.") {
			least, most = min(least, v), max(most, v)
		}
	}
	if found {
		s["members.member_cpu_s"] = memberCPU
	}
	if foundHost {
		s["members.host_side_cpu_s"] = hostCPU
	}
	if most > 0 {
		s["members.pods_per_node_min"], s["members.pods_per_node_max"] = least, most
	}
}

func (r *membersResult) native() sample {
	if r.Native == nil || r.Native.Median == nil {
		return sample{}
	}
	return r.Native.Median
}

func (r *membersResult) flotilla() sample {
	if r.Flotilla == nil || r.Flotilla.Median == nil {
		return sample{}
	}
	return r.Flotilla.Median
}

// runs is the number of runs behind the medians.
func (r *membersResult) runs() int {
	n := 0
	for _, mr := range []*modeResult{r.Native, r.Flotilla} {
		if mr != nil {
			n = max(n, len(mr.Runs))
		}
	}
	return n
}

// burstCells returns a burst row's native, flotilla and ratio cells, or
// false when neither mode has a value.
func (r *membersResult) burstCells(row row) ([]string, bool) {
	n, okn := r.native()[row.key]
	f, okf := r.flotilla()[row.key]
	q, okq := r.Ratios[row.key]
	return []string{cell(row.format, n, okn), cell(row.format, f, okf), cell("%.2f", q, okq)}, okn || okf
}

// targetLines are the targets as sentences.
func (r *membersResult) targetLines() []string {
	labels := []struct{ key, label string }{
		{"idle_host_api_requests_per_s_added_per_member", "idle host apiserver requests/s added per member"},
		{"burst_ready_ratio_vs_native", "burst ratio (all pods Ready) vs native with the same node count"},
	}
	var out []string
	for _, l := range labels {
		tc, ok := r.Targets[l.key]
		if !ok {
			continue
		}
		verdict := "met"
		if !tc.Met {
			verdict = "MISSED"
		}
		out = append(out, fmt.Sprintf("%d members: %s %.3f ≤ %.1f: %s", r.Members, l.label, tc.Value, tc.Limit, verdict))
	}
	return out
}

// printTable writes the members scenario as aligned text.
func (r *membersResult) printTable(out io.Writer) {
	fmt.Fprintf(out, "\nflotilla members — %d members with %d kwok nodes each (native: a host with %d), bursts of %d pods, median of %d runs\n",
		r.Members, r.NodesPerCluster, r.Members*r.NodesPerCluster, r.Replicas, r.runs())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "metric\tnative\tflotilla\tfl/native\t")
	for _, row := range membersRows {
		if cells, ok := r.burstCells(row); ok {
			fmt.Fprintf(tw, "%s\t%s\t\n", row.label, strings.Join(cells, "\t"))
		}
	}
	tw.Flush()
	r.printSpread(out, "burst.ready_s", "cpu.total_per_1000_pods_s")
	r.printCPU(out)
	fmt.Fprintf(out, "\nidle, %d members:\n", r.Members)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range membersIdleRows {
		if v, ok := r.Idle[row.key]; ok {
			fmt.Fprintf(tw, "%s\t%s\t\n", row.label, cell(row.format, v, true))
		}
	}
	tw.Flush()
	for _, l := range r.detailLines() {
		fmt.Fprintln(out, l)
	}
	for _, l := range r.targetLines() {
		fmt.Fprintf(out, "target: %s\n", l)
	}
	fmt.Fprintf(out, "members: load average before %s, after %s\n", r.LoadBefore, r.LoadAfter)
}

// printCPU writes the CPU seconds each kind of process spent in the
// bursts' measured phases (create and delete), summed over the members:
// what bounds the burst on a machine all the clusters share.
func (r *membersResult) printCPU(out io.Writer) {
	printCPUTable(out, []cpuColumn{{"native", r.native()}, {"flotilla", r.flotilla()}})
}

// detailLines break the idle figures down by verb and resource.
func (r *membersResult) detailLines() []string {
	return []string{
		"host requests/s added per member, by verb and resource: " + detailRates(r.Idle, "members_detail.idle_host_added_per_member_per_s"),
		"host requests/s per member as flotilla-node counts its own: " + detailRates(r.Idle, "members_detail.idle_node_host_requests_per_member_per_s"),
		"host requests/s with no flotilla-node, by verb and resource: " + detailRates(r.Idle, "members_detail.idle_host_without_per_s"),
		"member requests/s per member as flotilla-node counts its own: " + detailRates(r.Idle, "members_detail.idle_node_member_requests_per_member_per_s"),
		"host watches added per member, by resource: " + detailRates(r.Idle, "members_detail.host_watches_added_per_member"),
	}
}

// detailRates lists the metrics under prefix, largest first, with three
// decimals.
func detailRates(s sample, prefix string) string {
	prefix += "."
	type kv struct {
		k string
		v float64
	}
	var parts []kv
	for _, k := range sortedKeys(s) {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			parts = append(parts, kv{rest, s[k]})
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	// Largest first; sortedKeys already ordered equal values by name.
	for i := 1; i < len(parts); i++ {
		for j := i; j > 0 && math.Abs(parts[j].v) > math.Abs(parts[j-1].v); j-- {
			parts[j], parts[j-1] = parts[j-1], parts[j]
		}
	}
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = fmt.Sprintf("%s %.3f", p.k, p.v)
	}
	return strings.Join(out, ", ")
}

// printSpread writes every run's value of the keys: the spread behind each
// median.
func (r *membersResult) printSpread(out io.Writer, keys ...string) {
	for _, k := range keys {
		var parts []string
		for _, m := range []struct {
			name string
			mr   *modeResult
		}{{"native", r.Native}, {"flotilla", r.Flotilla}} {
			if m.mr == nil {
				continue
			}
			var vals []string
			for _, run := range m.mr.Runs {
				if v, ok := run[k]; ok {
					vals = append(vals, fmt.Sprintf("%.2f", v))
				}
			}
			if len(vals) > 0 {
				parts = append(parts, m.name+" "+strings.Join(vals, ", "))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(out, "runs of %s: %s\n", k, strings.Join(parts, "; "))
		}
	}
}

// printMarkdown writes the members scenario as Markdown tables.
func (r *membersResult) printMarkdown(out io.Writer) {
	fmt.Fprintf(out, "| metric | native | flotilla | flotilla/native |\n|---|--:|--:|--:|\n")
	for _, row := range membersRows {
		if cells, ok := r.burstCells(row); ok {
			fmt.Fprintf(out, "| %s | %s |\n", row.label, strings.Join(cells, " | "))
		}
	}
	fmt.Fprintf(out, "\n| idle, %d members | |\n|---|--:|\n", r.Members)
	for _, row := range membersIdleRows {
		if v, ok := r.Idle[row.key]; ok {
			fmt.Fprintf(out, "| %s | %s |\n", row.label, cell(row.format, v, true))
		}
	}
	fmt.Fprintln(out)
	for _, l := range r.detailLines() {
		fmt.Fprintf(out, "- %s\n", l)
	}
	for _, l := range r.targetLines() {
		fmt.Fprintf(out, "- target: %s\n", l)
	}
}

// The members scenario: many members with a flotilla-node each, against
// native.

package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/hack/bench/world"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// The members scenario: many members, one flotilla-node
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

// membersOptions are o as the members scenario's worlds see them:
// --members-count members, and every node with room for the whole burst.
func membersOptions(o *Options) *Options {
	mo := *o
	mo.Members = o.MembersCount
	mo.Scenarios = "burst"
	return &mo
}

// runMembers runs the members scenario in worlds of its own under dir. The
// result holds whatever was measured, also when it fails.
func runMembers(ctx context.Context, o *Options, bin testworld.Bin, nodeBinary, dir string, logf func(string, ...any)) (*measure.MembersResult, error) {
	res := &measure.MembersResult{Members: o.MembersCount, NodesPerCluster: o.NodesPerCluster, Replicas: o.Replicas,
		Idle: measure.Sample{}, Native: &measure.ModeResult{}, Flotilla: &measure.ModeResult{}, LoadBefore: measure.LoadAverage()}
	defer func() { res.LoadAfter = measure.LoadAverage() }()
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
func membersNative(ctx context.Context, o *Options, bin testworld.Bin, nodeBinary, dir string, mr *measure.ModeResult, logf func(string, ...any)) error {
	logf("members: native, a host with %d kwok nodes", o.Members*o.NodesPerCluster)
	t, err := start(ctx, measure.ModeNative, o, bin, nodeBinary, dir, logf)
	if err != nil {
		return err
	}
	defer func() {
		if err := t.World.Stop(); err != nil {
			logf("members: native: %v", err)
		}
	}()
	return membersBursts(ctx, t, mr, nil)
}

// membersFlotilla measures the host idle without and with a flotilla-node
// per member, then runs the bursts spread over all virtual nodes.
func membersFlotilla(ctx context.Context, o *Options, bin testworld.Bin, nodeBinary, dir string, res *measure.MembersResult, logf func(string, ...any)) error {
	cfg := world.Config(measure.ModeFlotilla, o.world(), bin, dir, logf)
	cfg.StartTimeout = membersStartTimeout
	logf("members: flotilla, a host and %d members with %d kwok nodes each", o.Members, o.NodesPerCluster)
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
	idle["world.start_s"] = measure.Seconds(time.Since(began))
	// The fleet checks members every second so that member-loss tests are
	// quick; this scenario runs flotilla-node's default, as deployed (a
	// --node-arg still wins).
	nodeArgs := append([]string{"--member-health-interval=" + scaleHealthInterval.String()}, o.NodeArgs...)
	f, err := fleet.DeployOnly(ctx, w, nodeBinary, nil, nodeArgs...)
	if err != nil {
		return fmt.Errorf("grant flotilla its roles: %w", err)
	}
	host, members := w.Host(), w.Members()
	if _, err := world.CreateNamespace(ctx, host, world.BenchNamespace); err != nil {
		return err
	}

	// The controller-manager starts watching the CRDs the fleet installed
	// only when its discovery next looks.
	hostOnly := []*testworld.Cluster{host}
	withoutLoad, err := measure.SettledLoad(ctx, hostOnly, measure.DiscoveryResync+5*time.Second, 3*time.Minute)
	if err != nil {
		return fmt.Errorf("host watches without flotilla-node: %w", err)
	}
	withoutMember, err := memberWatches(ctx, members)
	if err != nil {
		return err
	}
	logf("members: host idle without flotilla-node, %s", o.MembersIdle)
	without, err := observeIdle(ctx, host, nil, o.MembersIdle)
	if err != nil {
		return err
	}

	logf("members: starting %d flotilla-nodes", len(members))
	start := time.Now()
	nodes := map[string]nodeProc{}
	for i, m := range members {
		p, err := f.StartNode(m.Name, "--metrics-bind-address="+world.MetricsAddress(i))
		if err != nil {
			return err
		}
		nodes[m.Name] = nodeProc{pid: p.Pid(), metrics: world.MetricsAddress(i)}
	}
	for _, m := range members {
		if err := f.WaitNodeReady(ctx, m.Name, o.PhaseTimeout); err != nil {
			return err
		}
	}
	idle["members.nodes_ready_s"] = measure.Seconds(time.Since(start))
	logf("members: %d virtual nodes Ready %.1fs after start", len(members), idle["members.nodes_ready_s"])
	withLoad, err := measure.SettledLoad(ctx, hostOnly, measure.SettleQuiet, 2*time.Minute)
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
	case <-time.After(o.Settle):
	}
	logf("members: host idle with %d flotilla-nodes, %s", len(members), o.MembersIdle)
	with, err := observeIdle(ctx, host, nodes, o.MembersIdle)
	if err != nil {
		return err
	}
	if idle["members.world_rss_idle_gib"], err = worldRSS(w, nodes); err != nil {
		return err
	}
	idle["members.mem_available_idle_gib"] = measure.MemAvailableGiB()
	deriveIdle(idle, len(members), without, with, idleWatches{
		hostWithout: withoutLoad[host.Name].Watches, hostWith: withLoad[host.Name].Watches,
		memberWithout: withoutMember, memberWith: withMember,
	})
	logf("members: host %.2f requests/s without flotilla-node, %.2f with %d (%.3f per member); watches %.0f, %.0f",
		idle["members.idle_host_api_requests_per_s_without"], idle["members.idle_host_api_requests_per_s_with"], len(members),
		idle["members.idle_host_api_requests_per_s_added_per_member"], idle["members.host_watches_without"], idle["members.host_watches_with"])

	t := &target{Target: world.Attach(measure.ModeFlotilla, w, f, logf), opts: o}
	t.QuietExtra = map[string]float64{host.Name: float64(len(members)) * membersQuietPerMember}
	if err := t.prepareNamespace(ctx); err != nil {
		return err
	}
	return membersBursts(ctx, t, res.Flotilla, spreadOverVirtualNodes)
}

// membersBursts runs --runs bursts on t, each after the world is quiet,
// adding each run's sample to mr.
func membersBursts(ctx context.Context, t *target, mr *measure.ModeResult, shape func(*appsv1.Deployment)) error {
	for run := 1; run <= t.opts.Runs; run++ {
		s := measure.Sample{}
		if err := t.quiesce(ctx, "burst", s); err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		t.Meter.Reset()
		logs := t.MarkLogs()
		ready := func(_, _ measure.PodWatches) error {
			nodes := map[string]nodeProc{}
			for member, pid := range t.Meter.NodePIDs() {
				nodes[member] = nodeProc{pid: pid}
			}
			rss, err := worldRSS(t.World, nodes)
			s["members.world_rss_loaded_gib"] = rss
			s["members.mem_available_loaded_gib"] = measure.MemAvailableGiB()
			return err
		}
		got, err := runDeployment(ctx, t, "burst-"+strconv.Itoa(run), t.opts.Replicas, t.Meter, workloadHooks{shape: shape, ready: ready})
		if err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		t.countLogs(logs, "burst", s)
		maps.Copy(s, got)
		t.Meter.Report(s, t.opts.Replicas)
		addBurstRates(s, t.Meter.Requests(measure.RoleHost), t.Meter.Phases())
		mr.Runs = append(mr.Runs, s.Clean())
		t.Logf("members: %s run %d: ready %.2fs, deleted %.2fs, host %.0f requests/s", t.Mode, run,
			s["burst.ready_s"], s["delete.gone_s"], s["members.burst_host_api_requests_per_s"])
	}
	return nil
}

// addBurstRates adds the host apiserver's requests per second over the
// burst's measured phases (create and delete, each with its --settle).
func addBurstRates(s measure.Sample, host measure.RequestCounts, phases time.Duration) {
	secs := phases.Seconds()
	if secs <= 0 {
		return
	}
	var all float64
	for _, v := range host {
		all += v
	}
	cls := host.ByClass()
	s["members.burst_host_api_requests_per_s"] = all / secs
	s["members.burst_host_api_writes_per_s"] = cls[measure.ClassWrite] / secs
	s["members.burst_host_api_reads_per_s"] = cls[measure.ClassRead] / secs
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
		for _, p := range measure.ClusterProcesses(c) {
			pids = append(pids, p.Pid())
		}
	}
	for _, n := range nodes {
		pids = append(pids, n.pid)
	}
	var sum int64
	for _, pid := range pids {
		ps, err := measure.ReadProc(pid)
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
		l, err := measure.ScrapeLoad(ctx, c.Client())
		if err != nil {
			return nil, fmt.Errorf("watches of %s: %w", c.Name, err)
		}
		out[c.Name] = l.Watches.Total()
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
	host measure.RequestCounts
	// nodeReqs are the flotilla-nodes' own counts of their requests,
	// summed, keyed "apiserver VERB resource".
	nodeReqs measure.RequestCounts
	// nodeCPU is each flotilla-node's CPU seconds over the window and
	// nodeRSS its RSS at the end (MiB), by member.
	nodeCPU, nodeRSS map[string]float64
}

// isMetricsScrape reports whether a key of apiserver_request_total counts
// the scrapes of /metrics: non-resource requests carry their path where
// resource requests have their subresource.
func isMetricsScrape(key string) bool {
	return strings.HasPrefix(key, measure.RequestKey("GET", "", "")) && strings.HasSuffix(key, "metrics")
}

// observeIdle reads the host apiserver's request counters and the
// flotilla-nodes' CPU, RSS and request counters, waits window and reads
// them again.
func observeIdle(ctx context.Context, host *testworld.Cluster, nodes map[string]nodeProc, window time.Duration) (idleReading, error) {
	type reading struct {
		at       time.Time
		host     measure.RequestCounts
		nodeReqs measure.RequestCounts
		procs    map[string]measure.ProcSample
	}
	read := func() (reading, error) {
		r := reading{nodeReqs: measure.RequestCounts{}, procs: map[string]measure.ProcSample{}}
		for member, n := range nodes {
			rc, _, err := measure.ScrapeNodeRequests(ctx, n.metrics)
			if err != nil {
				return r, fmt.Errorf("scrape flotilla-node of %s: %w", member, err)
			}
			r.nodeReqs.Add(rc)
			if r.procs[member], err = measure.ReadProc(n.pid); err != nil {
				return r, fmt.Errorf("flotilla-node of %s: %w", member, err)
			}
		}
		rc, err := measure.ScrapeRequests(ctx, host.Client())
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
	ir := idleReading{elapsed: b.at.Sub(a.at).Seconds(), host: b.host.Sub(a.host), nodeReqs: b.nodeReqs.Sub(a.nodeReqs),
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
func dropScrape(rc measure.RequestCounts) {
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
	hostWithout, hostWith     measure.WatchCounts
	memberWithout, memberWith map[string]float64
}

// deriveIdle adds to s what members members' flotilla-nodes add to the
// idle host: requests per second (all verbs, and writes and reads) and
// open watches, in total and per member, by verb and resource; the
// members' watches per member; and the flotilla-nodes' idle CPU and RSS,
// summed, per process and the largest.
func deriveIdle(s measure.Sample, members int, without, with idleReading, w idleWatches) {
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
	total := func(rates map[string]float64, class measure.RequestClass) float64 {
		var t float64
		for k, v := range rates {
			verb, _, _ := strings.Cut(k, " ")
			if class == "" || measure.ClassOf(verb) == class {
				t += v
			}
		}
		return t
	}
	for _, c := range []struct {
		suffix string
		class  measure.RequestClass
	}{{"requests", ""}, {"writes", measure.ClassWrite}, {"reads", measure.ClassRead}} {
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
			if apiserver == measure.RoleHost {
				own += v
			}
		}
		s["members.idle_node_host_requests_per_member_per_s"] = own / with.elapsed / n
	}

	s["members.host_watches_without"] = w.hostWithout.Total()
	s["members.host_watches_with"] = w.hostWith.Total()
	s["members.host_watches_added_per_member"] = (w.hostWith.Total() - w.hostWithout.Total()) / n
	for k, v := range w.hostWith.Sub(w.hostWithout) {
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

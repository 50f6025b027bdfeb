// Command bench measures flotilla against a single cluster (issue 7). In
// one invocation it runs the same workload three ways — native (the host
// cluster with fake nodes of the members' total capacity, no flotilla),
// direct (in one member cluster) and flotilla (created in the host,
// forwarded through virtual nodes to the members) — each in a fresh test
// world with the same control-plane client limits, and prints the medians
// and the ratios flotilla/native and flotilla/direct. With --pin every
// cluster runs on one CPU of its own (host and flotilla-node on CPU 0,
// members on CPU 1), as separate machines would.
//
//	go run ./hack/bench --replicas 100 --runs 1 --steady-duration 10s --noise-pods 100   # a quick look
//	go run ./hack/bench --out results.json          # the default benchmark
//	go run ./hack/bench --pin --out pinned.json
//	go run ./hack/bench --scenarios scale           # one flotilla-node, 50 partitions of 500 nodes
//	go run ./hack/bench --scenarios members --runs 1 # 20 members, a flotilla-node each, against native
//	go run ./hack/bench --scenarios footprint10k --runs 1 --phase-timeout 30m --timeout 60m
//
// Each scenario is a file of its own (scenario.go lists them): burst,
// propagation, steady and noise by default, footprint10k (10,000 pods
// forwarded at once) when asked for. The scale scenario (scale.go) runs in
// a world of its own instead of in the modes: one flotilla-node serving
// --scale-partitions label partitions of a member with --scale-nodes
// nodes, against the same flotilla-node serving one partition. The members
// scenario (members.go) also does: --members-count members with a
// flotilla-node each, against a native host with as many kwok nodes.
//
// See BENCHMARKS.md for results and what bounds them.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// options are the command-line flags.
type options struct {
	replicas        int
	runs            int
	pin             bool
	members         int
	nodesPerCluster int
	clientQPS       float32
	clientBurst     int
	modes           string
	scenarios       string
	probePods       int
	probeInterval   time.Duration
	probeSettle     time.Duration
	steadyRate      float64
	steadyDuration  time.Duration
	noisePods       int
	footprintPods   int
	hostSecrets     int
	memberPods      int
	hostSecretKiB   int
	growthPods      string
	growthPlot      string
	idleWindow      time.Duration
	settle          time.Duration
	phaseTimeout    time.Duration
	timeout         time.Duration
	out             string
	keepDir         string
	profileDir      string
	profileDuration time.Duration
	nodeArgs        []string
	nodeBinary      string
	floorBinary     string // built by the bench, not a flag
	markdown        string
	scalePartitions int
	scaleNodes      int
	scalePods       int
	scaleObserve    time.Duration
	scaleTimeout    time.Duration
	membersCount    int
	membersIdle     time.Duration
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	fs.IntVar(&o.replicas, "replicas", 1000, "pods in the burst Deployment (5000 for the large burst)")
	fs.IntVar(&o.runs, "runs", 3, "runs per mode; medians are reported")
	fs.BoolVar(&o.pin, "pin", false, "one CPU per cluster: host processes and flotilla-node on CPU 0, member processes on CPU 1 (native and direct then run on one CPU)")
	fs.IntVar(&o.members, "members", 3, "member clusters flotilla forwards to")
	fs.IntVar(&o.nodesPerCluster, "nodes-per-cluster", 3, "kwok nodes per member cluster; the native host gets members x this many")
	fs.Float32Var(&o.clientQPS, "client-qps", 500, "client QPS of every controller-manager and scheduler, in all modes")
	fs.IntVar(&o.clientBurst, "client-burst", 1000, "client burst of every controller-manager and scheduler, in all modes")
	fs.StringVar(&o.modes, "modes", "native,direct,flotilla", "modes to measure")
	fs.StringVar(&o.scenarios, "scenarios", defaultScenarios, "scenarios to run, in the order given, in the modes they apply to: burst (footprint is measured during it), propagation, steady, noise, footprint10k and growth (opt-in: minutes each), hostsecrets and memberpods (opt-in); scale once, in a world of its own, after the modes")
	fs.IntVar(&o.probePods, "probe-pods", 100, "pods the propagation scenario changes and deletes one at a time")
	fs.Float64Var(&o.steadyRate, "steady-rate", 20, "steady: pods created per second")
	fs.DurationVar(&o.steadyDuration, "steady-duration", time.Minute, "steady: how long pods are created at --steady-rate")
	fs.IntVar(&o.noisePods, "noise-pods", 1000, "noise: pods of the member's own Deployment, created and deleted alone and during a burst of --replicas")
	fs.IntVar(&o.hostSecrets, "host-secrets", 100, "hostsecrets: Secrets created in the host, used by no pod")
	fs.IntVar(&o.hostSecretKiB, "host-secret-kib", 256, "hostsecrets: size of each Secret's data (KiB; a Helm release is up to 1024)")
	fs.IntVar(&o.memberPods, "member-pods", 2000, "memberpods: pods of the member's own Deployment, which flotilla-node caches but does not forward")
	fs.IntVar(&o.footprintPods, "footprint-pods", 10000, "footprint10k: pods forwarded at once (10000 needs a --phase-timeout and --timeout of about 30m and 60m)")
	fs.StringVar(&o.growthPods, "growth-pods", "1000,5000,10000", "growth: the sizes, in pods, each run through create and delete on a quiet world (use --members 1 to measure one flotilla-node)")
	fs.StringVar(&o.growthPlot, "growth-plot", "", "growth: draw flotilla-node's CPU and RSS against pods, with fitted lines, into this SVG file (also with --markdown)")
	fs.DurationVar(&o.probeInterval, "probe-interval", 50*time.Millisecond, "pace of the propagation scenario's changes")
	fs.DurationVar(&o.probeSettle, "probe-settle", 10*time.Second, "pause between the propagation pods becoming Ready and the first change, so that their own start-up traffic has drained")
	fs.DurationVar(&o.idleWindow, "idle-window", 15*time.Second, "how long flotilla-node is watched doing nothing, before the runs and with the burst's pods")
	fs.DurationVar(&o.settle, "settle", 10*time.Second, "time after a burst phase completes during which trailing work (status, events) still counts towards its CPU and API requests")
	fs.DurationVar(&o.phaseTimeout, "phase-timeout", 10*time.Minute, "bound on each phase of a scenario")
	fs.DurationVar(&o.timeout, "timeout", time.Hour, "bound on the whole invocation (the default scenarios with --runs 3 take about half of it on an idle 2-CPU machine)")
	fs.StringVar(&o.out, "out", "", "write the results as JSON to this file")
	fs.StringVar(&o.keepDir, "keep-dir", "", "keep the worlds' files and logs under this directory (default: a temporary directory, removed unless a mode failed)")
	fs.StringVar(&o.profileDir, "profile-dir", "", "write CPU and heap profiles of each flotilla-node, taken during the first burst, and a heap profile of each when idle, after a collection (scale: during the idle window and the workload), to this directory")
	fs.DurationVar(&o.profileDuration, "profile-duration", time.Minute, "length of the CPU profiles, which start with the first burst")
	fs.StringArrayVar(&o.nodeArgs, "node-arg", nil, "extra flotilla-node argument (repeatable)")
	fs.StringVar(&o.nodeBinary, "node-binary", "", "flotilla-node binary to measure (default: built from this tree)")
	fs.StringVar(&o.markdown, "markdown", "", "only print the results in this --out file as a Markdown table, measuring nothing")
	fs.IntVar(&o.scalePartitions, "scale-partitions", 50, "scale: label partitions of the member, all served by one flotilla-node")
	fs.IntVar(&o.scaleNodes, "scale-nodes", 500, "scale: kwok nodes of the member, split evenly into the partitions")
	fs.IntVar(&o.scalePods, "scale-pods", 500, "scale: pods of the Deployment spread evenly over the partitions")
	fs.DurationVar(&o.scaleObserve, "scale-observe", 2*time.Minute, "scale: how long the partitions are watched doing nothing (every node Ready, every lease renewed) and flotilla-node metered idle")
	fs.DurationVar(&o.scaleTimeout, "scale-timeout", 14*time.Minute, "scale: bound on the whole scenario, world start-up included")
	fs.IntVar(&o.membersCount, "members-count", 20, "members: member clusters, each with --nodes-per-cluster kwok nodes and a flotilla-node of its own; the native host gets members-count x nodes-per-cluster nodes")
	fs.DurationVar(&o.membersIdle, "members-idle", time.Minute, "members: how long the host apiserver is watched idle, before any flotilla-node runs and once all are Ready")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case o.replicas < 1 || o.runs < 1 || o.members < 1 || o.nodesPerCluster < 1 || o.probePods < 1 ||
		o.noisePods < 1 || o.footprintPods < 1 || o.hostSecrets < 1 || o.memberPods < 1 || o.scalePartitions < 1 || o.scalePods < 1 || o.membersCount < 1:
		return nil, errors.New("--replicas, --runs, --members, --nodes-per-cluster, --probe-pods, --noise-pods, --footprint-pods, --host-secrets, --member-pods, --scale-partitions, --scale-pods and --members-count must be at least 1")
	case o.hostSecretKiB < 1 || o.hostSecretKiB > 1024:
		return nil, errors.New("--host-secret-kib must be from 1 to 1024 (a Secret holds at most 1 MiB)")
	case o.membersIdle < time.Second:
		return nil, errors.New("--members-idle must be at least 1s")
	case o.steadyRate <= 0 || o.steadyRate > 1000 || steadyPods(o) < 1:
		return nil, errors.New("--steady-rate must be above 0 and at most 1000 a second, and times --steady-duration at least one pod")
	case o.scaleNodes < o.scalePartitions:
		return nil, errors.New("--scale-nodes must be at least --scale-partitions: every partition needs a node")
	case o.pin && !pinnable():
		return nil, fmt.Errorf("--pin needs CPUs %d and %d", hostCPU, memberCPU)
	}
	if _, err := selectModes(o.modes); err != nil {
		return nil, err
	}
	if _, _, err := selectScenarios(o.scenarios); err != nil {
		return nil, err
	}
	if _, err := growthSizes(o.growthPods); err != nil {
		return nil, err
	}
	return o, nil
}

func main() {
	if o, err := parseFlags(os.Args[1:]); err == nil && o.markdown != "" {
		r, err := readResults(o.markdown)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		r.printMarkdown(os.Stdout)
		if o.growthPlot != "" {
			if err := r.writeGrowthPlot(o.growthPlot); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				os.Exit(1)
			}
		}
		return
	}
	// The private network namespace has no route out, so whatever needs the
	// module proxy is built first, out here.
	if !testworld.InNetns() {
		prepare := fleet.Prepare
		if nodeBinaryFlagSet(os.Args[1:]) {
			prepare = func(ctx context.Context) error { _, err := testworld.Binaries(ctx); return err }
		}
		if err := prepare(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	os.Exit(testworld.RunInNetns(func() int {
		if err := run(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		return 0
	}))
}

// nodeBinaryFlagSet reports whether the arguments name a flotilla-node
// binary, which then need not be built.
func nodeBinaryFlagSet(args []string) bool {
	o, err := parseFlags(args)
	return err == nil && o.nodeBinary != ""
}

func run() error {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	scenarios, own, _ := selectScenarios(o.scenarios)
	selected, _ := selectModes(o.modes)
	// A mode none of the scenarios applies to would only start a world.
	modes := slices.DeleteFunc(selected, func(m mode) bool {
		return !slices.ContainsFunc(scenarios, func(s scenario) bool { return s.applies(m) })
	})
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	// Everything below honours ctx; this is the backstop for anything that
	// does not, so that a run always ends. Exiting kills the worlds'
	// processes (they die with this process).
	watchdog := time.AfterFunc(o.timeout+2*time.Minute, func() {
		fmt.Fprintf(os.Stderr, "bench: still running %s after --timeout %s; exiting\n", 2*time.Minute, o.timeout)
		os.Exit(3)
	})
	defer watchdog.Stop()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}

	root, err := testworld.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := benchDir(o.keepDir)
	if err != nil {
		return err
	}
	keep := o.keepDir != ""
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}()
	bin, err := testworld.Binaries(ctx)
	if err != nil {
		return err
	}
	nodeBinary := o.nodeBinary
	if nodeBinary == "" {
		if nodeBinary, err = fleet.BuildNode(ctx, dir); err != nil {
			return err
		}
	}
	if o.floorBinary, err = fleet.BuildPackage(ctx, floorPackage, filepath.Join(dir, "floor")); err != nil {
		return err
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
	}
	nodeVersion := "built from this tree"
	if o.nodeBinary != "" {
		nodeVersion = "--node-binary " + o.nodeBinary
	}
	res := &results{
		Command:    "go run ./hack/bench " + strings.Join(os.Args[1:], " "),
		Placement:  placementName(o.pin),
		Started:    time.Now(),
		Machine:    describeMachine(),
		Versions:   versions(ctx, bin, root),
		LoadBefore: loadAverage(),
		Modes:      map[mode]*modeResult{},
		Options: map[string]string{
			"replicas": strconv.Itoa(o.replicas), "runs": strconv.Itoa(o.runs), "members": strconv.Itoa(o.members),
			"nodesPerCluster": strconv.Itoa(o.nodesPerCluster), "clientQPS": fmt.Sprint(o.clientQPS),
			"clientBurst": strconv.Itoa(o.clientBurst), "probePods": strconv.Itoa(o.probePods),
			"probeInterval": o.probeInterval.String(), "probeSettle": o.probeSettle.String(), "idleWindow": o.idleWindow.String(), "settle": o.settle.String(),
			"steadyRate": fmt.Sprint(o.steadyRate), "steadyDuration": o.steadyDuration.String(),
			"noisePods": strconv.Itoa(o.noisePods), "footprintPods": strconv.Itoa(o.footprintPods),
		},
	}
	if own.scale {
		res.Options["scalePartitions"] = strconv.Itoa(o.scalePartitions)
		res.Options["scaleNodes"] = strconv.Itoa(o.scaleNodes)
		res.Options["scalePods"] = strconv.Itoa(o.scalePods)
		res.Options["scaleObserve"] = o.scaleObserve.String()
	}
	res.Versions["flotilla-node"] = nodeVersion
	if own.members {
		res.Options["membersCount"] = strconv.Itoa(o.membersCount)
		res.Options["membersIdle"] = o.membersIdle.String()
	}
	if len(scenarios) == 0 {
		modes = nil // only scenarios of worlds of their own
		res.Modes = nil
		logf("%s cores, load %s, scenarios %s; files in %s", res.Placement, res.LoadBefore, o.scenarios, dir)
	} else {
		logf("%s cores, load %s, modes %v, scenarios %s, %d replicas, %d runs; files in %s", res.Placement, res.LoadBefore, modes, o.scenarios, o.replicas, o.runs, dir)
	}
	for _, m := range modes {
		mr, err := runMode(ctx, m, o, scenarios, bin, nodeBinary, filepath.Join(dir, string(m)), res.Placement, logf)
		res.Modes[m] = mr
		if err != nil {
			mr.Error = err.Error()
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", m, err))
			keep = true
			logf("%s failed (files kept in %s): %v", m, dir, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	if own.scale && ctx.Err() == nil {
		sr, err := runScale(ctx, o, bin, nodeBinary, filepath.Join(dir, "scale"), logf)
		res.Scale = sr
		if err != nil {
			sr.Error = err.Error()
			res.Errors = append(res.Errors, fmt.Sprintf("scale: %v", err))
			keep = true
			logf("scale failed (files kept in %s): %v", dir, err)
		}
	}
	if own.members && ctx.Err() == nil {
		mr, err := runMembers(ctx, o, bin, nodeBinary, filepath.Join(dir, "members"), logf)
		res.Members = mr
		if err != nil {
			mr.Error = err.Error()
			res.Errors = append(res.Errors, fmt.Sprintf("members: %v", err))
			keep = true
			logf("members failed (files kept in %s): %v", dir, err)
		}
	}
	res.Finished = time.Now()
	res.LoadAfter = loadAverage()
	res.finish()
	res.printTable(os.Stdout)
	if o.growthPlot != "" {
		if err := res.writeGrowthPlot(o.growthPlot); err != nil {
			return err
		}
		logf("growth plot written to %s", o.growthPlot)
	}
	fmt.Printf("load average before %s, after %s; took %s\n", res.LoadBefore, res.LoadAfter, res.Finished.Sub(res.Started).Round(time.Second))
	if o.out != "" {
		if err := res.write(o.out); err != nil {
			return err
		}
		logf("results written to %s", o.out)
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("%d mode(s) or scenario(s) failed", len(res.Errors))
	}
	return nil
}

// runMode measures one mode in a world of its own: it starts the world,
// samples flotilla-node idle, runs every applicable scenario --runs times
// and stops the world.
func runMode(ctx context.Context, m mode, o *options, scenarios []scenario, bin testworld.Bin, nodeBinary, dir, placement string, logf func(string, ...any)) (*modeResult, error) {
	mr := &modeResult{}
	logf("%s: starting the world", m)
	t, err := startTarget(ctx, m, o, bin, nodeBinary, dir, logf)
	if err != nil {
		return mr, err
	}
	defer func() {
		if err := t.world.Stop(); err != nil {
			logf("%s: %v", m, err)
		}
	}()
	if err := t.meter.memory("idle", t.once); err != nil {
		return mr, err
	}
	var floor *floorProcess
	if m == modeFlotilla {
		// The floor idles beside flotilla-node, on the host and the
		// first member, and is read at the end of the same window.
		if floor, err = startFloor(ctx, o.floorBinary, []*testworld.Cluster{t.world.Host(), t.members[0]}); err != nil {
			return mr, err
		}
		defer floor.stop()
	}
	if err := t.meter.idle(ctx, o.idleWindow, "idle", t.once); err != nil {
		return mr, err
	}
	if floor != nil {
		if err := floorMemory(floor, t.once); err != nil {
			return mr, err
		}
	}
	if m == modeFlotilla && o.profileDir != "" {
		// What an idle flotilla-node holds, after the idle reading.
		if err := heapProfiles(ctx, t, o.profileDir, "idle"); err != nil {
			return mr, err
		}
	}
	for run := 1; run <= o.runs; run++ {
		s := sample{}
		var profiles func() error
		if run == 1 && m == modeFlotilla && o.profileDir != "" {
			profiles = profileNodes(ctx, t, o.profileDir, placement)
		}
		for _, sc := range scenarios {
			if !sc.applies(m) {
				continue
			}
			if err := t.quiesce(ctx, sc.name(), s); err != nil {
				return mr, fmt.Errorf("run %d: %w", run, err)
			}
			if err := sc.run(ctx, t, run, s); err != nil {
				return mr, fmt.Errorf("run %d, %s: %w", run, sc.name(), err)
			}
		}
		if profiles != nil {
			if err := profiles(); err != nil {
				logf("%s: profiles: %v", m, err)
			}
		}
		if run == 1 {
			for k, v := range t.once {
				if _, ok := s[k]; !ok {
					s[k] = v
				}
			}
		}
		mr.Runs = append(mr.Runs, s.clean())
		if _, ok := s["burst.ready_s"]; ok {
			logf("%s run %d: ready %.2fs (%.0f pods/s), deleted %.2fs", m, run, s["burst.ready_s"], s["burst.pods_per_s"], s["delete.gone_s"])
		} else {
			logf("%s run %d done", m, run)
		}
	}
	return mr, nil
}

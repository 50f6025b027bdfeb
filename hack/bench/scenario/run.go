// Running every selected mode and scenario, and the idle readings of each
// world.

package scenario

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/hack/bench/world"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// Run measures what o asks for: every selected mode in a world of its own,
// its scenarios --runs times, then the scenarios of worlds of their own
// (scale, members). It runs inside the test world's network namespace
// (world.Run) and returns the results, also when a mode failed: then with
// the error recorded in them and as the error returned. command is what
// the results name as the invocation.
func Run(o *Options, command string) (*measure.Results, error) {
	scenarios, own, _ := selectScenarios(o.Scenarios)
	selected, _ := selectModes(o.Modes)
	// A mode none of the scenarios applies to would only start a world.
	modes := slices.DeleteFunc(selected, func(m measure.Mode) bool {
		return !slices.ContainsFunc(scenarios, func(s scenario) bool { return s.applies(m) })
	})
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	// Everything below honours ctx; this is the backstop for anything that
	// does not, so that a run always ends. Exiting kills the worlds'
	// processes (they die with this process).
	watchdog := time.AfterFunc(o.Timeout+2*time.Minute, func() {
		fmt.Fprintf(os.Stderr, "bench: still running %s after --timeout %s; exiting\n", 2*time.Minute, o.Timeout)
		os.Exit(3)
	})
	defer watchdog.Stop()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}

	root, err := testworld.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := world.Dir(o.KeepDir)
	if err != nil {
		return nil, err
	}
	keep := o.KeepDir != ""
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}()
	bin, err := testworld.Binaries(ctx)
	if err != nil {
		return nil, err
	}
	nodeBinary := o.NodeBinary
	if nodeBinary == "" {
		if nodeBinary, err = fleet.BuildNode(ctx, dir); err != nil {
			return nil, err
		}
	}
	floorBinary, err := testworld.BuildPackage(ctx, world.FloorPackage, filepath.Join(dir, "floor"))
	if err != nil {
		return nil, err
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, err
		}
	}
	nodeVersion := "built from this tree"
	if o.NodeBinary != "" {
		nodeVersion = "--node-binary " + o.NodeBinary
	}
	res := &measure.Results{
		Command:    command,
		Placement:  measure.PlacementName(o.Pin),
		Started:    time.Now(),
		Machine:    measure.DescribeMachine(),
		Versions:   measure.Versions(ctx, bin, root),
		LoadBefore: measure.LoadAverage(),
		Modes:      map[measure.Mode]*measure.ModeResult{},
		Options:    o.recorded(own),
	}
	res.Versions["flotilla-node"] = nodeVersion
	if len(scenarios) == 0 {
		modes = nil // only scenarios of worlds of their own
		res.Modes = nil
		logf("%s cores, load %s, scenarios %s; files in %s", res.Placement, res.LoadBefore, o.Scenarios, dir)
	} else {
		logf("%s cores, load %s, modes %v, scenarios %s, %d replicas, %d runs; files in %s", res.Placement, res.LoadBefore, modes, o.Scenarios, o.Replicas, o.Runs, dir)
	}
	for _, m := range modes {
		mr, err := runMode(ctx, m, o, scenarios, bin, nodeBinary, floorBinary, filepath.Join(dir, string(m)), res.Placement, logf)
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
	res.LoadAfter = measure.LoadAverage()
	if len(res.Errors) > 0 {
		return res, fmt.Errorf("%d mode(s) or scenario(s) failed", len(res.Errors))
	}
	return res, nil
}

// recorded are the options the results keep, those of the scenarios of
// worlds of their own only when they ran.
func (o *Options) recorded(own ownWorlds) map[string]string {
	r := map[string]string{
		"replicas": strconv.Itoa(o.Replicas), "runs": strconv.Itoa(o.Runs), "members": strconv.Itoa(o.Members),
		"nodesPerCluster": strconv.Itoa(o.NodesPerCluster), "clientQPS": fmt.Sprint(o.ClientQPS),
		"clientBurst": strconv.Itoa(o.ClientBurst), "probePods": strconv.Itoa(o.ProbePods),
		"probeInterval": o.ProbeInterval.String(), "probeSettle": o.ProbeSettle.String(), "idleWindow": o.IdleWindow.String(), "settle": o.Settle.String(),
		"steadyRate": fmt.Sprint(o.SteadyRate), "steadyDuration": o.SteadyDuration.String(),
		"noisePods": strconv.Itoa(o.NoisePods), "footprintPods": strconv.Itoa(o.FootprintPods),
		"exportedPods": strconv.Itoa(o.ExportedPods), "exportedFlips": strconv.Itoa(o.ExportedFlips),
	}
	if own.scale {
		r["scalePartitions"] = strconv.Itoa(o.ScalePartitions)
		r["scaleNodes"] = strconv.Itoa(o.ScaleNodes)
		r["scalePods"] = strconv.Itoa(o.ScalePods)
		r["scaleObserve"] = o.ScaleObserve.String()
	}
	if own.members {
		r["membersCount"] = strconv.Itoa(o.MembersCount)
		r["membersIdle"] = o.MembersIdle.String()
	}
	return r
}

// runMode measures one mode in a world of its own: it starts the world,
// samples flotilla-node idle, runs every applicable scenario --runs times
// and stops the world.
func runMode(ctx context.Context, m measure.Mode, o *Options, scenarios []scenario, bin testworld.Bin, nodeBinary, floorBinary, dir, placement string, logf func(string, ...any)) (*measure.ModeResult, error) {
	mr := &measure.ModeResult{}
	logf("%s: starting the world", m)
	t, err := start(ctx, m, o, bin, nodeBinary, dir, logf)
	if err != nil {
		return mr, err
	}
	defer func() {
		if err := t.World.Stop(); err != nil {
			logf("%s: %v", m, err)
		}
	}()
	if err := t.Meter.Memory("idle", t.Once); err != nil {
		return mr, err
	}
	var floor *world.Floor
	if m == measure.ModeFlotilla {
		// The floor idles beside flotilla-node, on the host and the
		// first member, and is read at the end of the same window.
		if floor, err = world.StartFloor(ctx, floorBinary, []*testworld.Cluster{t.World.Host(), t.Members[0]}); err != nil {
			return mr, err
		}
		defer floor.Stop()
	}
	if err := t.Meter.Idle(ctx, o.IdleWindow, "idle", t.Once); err != nil {
		return mr, err
	}
	if floor != nil {
		if err := floorMemory(floor.PID(), t.Once); err != nil {
			return mr, err
		}
	}
	if m == measure.ModeFlotilla && o.ProfileDir != "" {
		// What an idle flotilla-node holds, after the idle reading.
		if err := t.heapProfiles(ctx, "idle"); err != nil {
			return mr, err
		}
	}
	for run := 1; run <= o.Runs; run++ {
		s := measure.Sample{}
		var profiles func() error
		if run == 1 && m == measure.ModeFlotilla {
			profiles = t.profiles(ctx, placement)
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
			for k, v := range t.Once {
				if _, ok := s[k]; !ok {
					s[k] = v
				}
			}
		}
		mr.Runs = append(mr.Runs, s.Clean())
		if _, ok := s["burst.ready_s"]; ok {
			logf("%s run %d: ready %.2fs (%.0f pods/s), deleted %.2fs", m, run, s["burst.ready_s"], s["burst.pods_per_s"], s["delete.gone_s"])
		} else {
			logf("%s run %d done", m, run)
		}
	}
	return mr, nil
}

// floorMemory adds the floor program's RSS (process pid) to s, and
// flotilla-node's idle RSS (the largest) over it.
func floorMemory(pid int, s measure.Sample) error {
	ps, err := measure.ReadProc(pid)
	if err != nil {
		return fmt.Errorf("sample the floor program: %w", err)
	}
	rss := float64(ps.RSSBytes) / (1 << 20)
	s["footprint.idle_floor_rss_mib"] = rss
	s["footprint.idle_floor_rss_file_mib"] = float64(ps.FileBytes) / (1 << 20)
	if node, ok := s["footprint.idle_node_rss_mib"]; ok && rss > 0 {
		s["footprint.idle_node_rss_over_floor"] = node / rss
	}
	return nil
}

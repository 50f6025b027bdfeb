// Command bench measures flotilla against a single cluster. In one
// invocation it runs the same workload three ways — native (the host
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
//	go run ./hack/bench --markdown results.json     # print results as Markdown, measuring nothing
//
// This file holds the flags only. The packages under it are the rest:
// scenario (the workloads and the order they run in), world (the test
// world of a mode and its processes), measure (the meters and the results
// they fill) and report (tables, Markdown and the growth plot).
//
// See BENCHMARKS.md for results and what bounds them.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/hack/bench/report"
	"flotilla.io/flotilla/hack/bench/scenario"
	"flotilla.io/flotilla/hack/bench/world"
)

// flags are the command line: what to measure, and what to do with the
// results.
type flags struct {
	scenario.Options
	out, markdown, growthPlot string
	args                      []string
}

func parseFlags(args []string, output io.Writer) (*flags, error) {
	o := &flags{args: args}
	d := scenario.Defaults()
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	fs.SetOutput(output)
	fs.IntVar(&o.Replicas, "replicas", d.Replicas, "pods in the burst Deployment (5000 for the large burst)")
	fs.IntVar(&o.Runs, "runs", d.Runs, "runs per mode; medians are reported")
	fs.BoolVar(&o.Pin, "pin", d.Pin, "one CPU per cluster: host processes and flotilla-node on CPU 0, member processes on CPU 1 (native and direct then run on one CPU)")
	fs.IntVar(&o.Members, "members", d.Members, "member clusters flotilla forwards to")
	fs.IntVar(&o.NodesPerCluster, "nodes-per-cluster", d.NodesPerCluster, "kwok nodes per member cluster; the native host gets members x this many")
	fs.Float32Var(&o.ClientQPS, "client-qps", d.ClientQPS, "client QPS of every controller-manager and scheduler, in all modes")
	fs.IntVar(&o.ClientBurst, "client-burst", d.ClientBurst, "client burst of every controller-manager and scheduler, in all modes")
	fs.StringVar(&o.Modes, "modes", d.Modes, "modes to measure")
	fs.StringVar(&o.Scenarios, "scenarios", d.Scenarios, "scenarios to run, in the order given, in the modes they apply to: burst (footprint is measured during it), propagation, steady, noise, footprint10k and growth (opt-in: minutes each), hostsecrets, memberpods and exported (opt-in); scale once, in a world of its own, after the modes")
	fs.IntVar(&o.ProbePods, "probe-pods", d.ProbePods, "pods the propagation scenario changes and deletes one at a time")
	fs.Float64Var(&o.SteadyRate, "steady-rate", d.SteadyRate, "steady: pods created per second")
	fs.DurationVar(&o.SteadyDuration, "steady-duration", d.SteadyDuration, "steady: how long pods are created at --steady-rate")
	fs.IntVar(&o.NoisePods, "noise-pods", d.NoisePods, "noise: pods of the member's own Deployment, created and deleted alone and during a burst of --replicas")
	fs.IntVar(&o.HostSecrets, "host-secrets", d.HostSecrets, "hostsecrets: Secrets created in the host, used by no pod")
	fs.IntVar(&o.HostSecretKiB, "host-secret-kib", d.HostSecretKiB, "hostsecrets: size of each Secret's data (KiB; a Helm release is up to 1024)")
	fs.IntVar(&o.MemberPods, "member-pods", d.MemberPods, "memberpods: pods of the member's own Deployment, which flotilla-node caches but does not forward")
	fs.IntVar(&o.ExportedPods, "exported-pods", d.ExportedPods, "exported: endpoints of the exported Service, pods of a Deployment spread over the members")
	fs.IntVar(&o.ExportedFlips, "exported-flips", d.ExportedFlips, "exported: member pods made not Ready one at a time, before and after the export, to count EndpointSlice writes per change")
	fs.IntVar(&o.FootprintPods, "footprint-pods", d.FootprintPods, "footprint10k: pods forwarded at once (10000 needs a --phase-timeout and --timeout of about 30m and 60m)")
	fs.StringVar(&o.GrowthPods, "growth-pods", d.GrowthPods, "growth: the sizes, in pods, each run through create and delete on a quiet world (use --members 1 to measure one flotilla-node)")
	fs.StringVar(&o.growthPlot, "growth-plot", "", "growth: draw flotilla-node's CPU and RSS against pods, with fitted lines, into this SVG file (also with --markdown)")
	fs.DurationVar(&o.ProbeInterval, "probe-interval", d.ProbeInterval, "pace of the propagation scenario's changes")
	fs.DurationVar(&o.ProbeSettle, "probe-settle", d.ProbeSettle, "pause between the propagation pods becoming Ready and the first change, so that their own start-up traffic has drained")
	fs.DurationVar(&o.IdleWindow, "idle-window", d.IdleWindow, "how long flotilla-node is watched doing nothing, before the runs and with the burst's pods")
	fs.DurationVar(&o.Settle, "settle", d.Settle, "time after a burst phase completes during which trailing work (status, events) still counts towards its CPU and API requests")
	fs.DurationVar(&o.PhaseTimeout, "phase-timeout", d.PhaseTimeout, "bound on each phase of a scenario")
	fs.DurationVar(&o.Timeout, "timeout", d.Timeout, "bound on the whole invocation (the default scenarios with --runs 3 take about half of it on an idle 2-CPU machine)")
	fs.StringVar(&o.out, "out", "", "write the results as JSON to this file")
	fs.StringVar(&o.KeepDir, "keep-dir", "", "keep the worlds' files and logs under this directory (default: a temporary directory, removed unless a mode failed)")
	fs.StringVar(&o.ProfileDir, "profile-dir", "", "write CPU and heap profiles of each flotilla-node, taken during the first burst, and a heap profile of each when idle, after a collection (scale: during the idle window and the workload), to this directory")
	fs.DurationVar(&o.ProfileDuration, "profile-duration", d.ProfileDuration, "length of the CPU profiles, which start with the first burst")
	fs.StringArrayVar(&o.NodeArgs, "node-arg", nil, "extra flotilla-node argument (repeatable)")
	fs.StringVar(&o.NodeBinary, "node-binary", "", "flotilla-node binary to measure (default: built from this tree)")
	fs.StringVar(&o.markdown, "markdown", "", "only print the results in this --out file as a Markdown table, measuring nothing")
	fs.IntVar(&o.ScalePartitions, "scale-partitions", d.ScalePartitions, "scale: label partitions of the member, all served by one flotilla-node")
	fs.IntVar(&o.ScaleNodes, "scale-nodes", d.ScaleNodes, "scale: kwok nodes of the member, split evenly into the partitions")
	fs.IntVar(&o.ScalePods, "scale-pods", d.ScalePods, "scale: pods of the Deployment spread evenly over the partitions")
	fs.DurationVar(&o.ScaleObserve, "scale-observe", d.ScaleObserve, "scale: how long the partitions are watched doing nothing (every node Ready, every lease renewed) and flotilla-node metered idle")
	fs.DurationVar(&o.ScaleTimeout, "scale-timeout", d.ScaleTimeout, "scale: bound on the whole scenario, world start-up included")
	fs.IntVar(&o.MembersCount, "members-count", d.MembersCount, "members: member clusters, each with --nodes-per-cluster kwok nodes and a flotilla-node of its own; the native host gets members-count x nodes-per-cluster nodes")
	fs.DurationVar(&o.MembersIdle, "members-idle", d.MembersIdle, "members: how long the host apiserver is watched idle, before any flotilla-node runs and once all are Ready")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

func main() {
	os.Exit(bench(os.Args[1:], os.Stdout, os.Stderr, measureAll))
}

// bench runs the command and returns its exit code. Help, a bad flag and
// --markdown start nothing; everything else is measured by measure.
func bench(args []string, stdout, stderr io.Writer, measure func(*flags) int) int {
	var usage bytes.Buffer
	f, err := parseFlags(args, &usage)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		_, _ = stdout.Write(usage.Bytes())
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	case f.markdown != "":
		if err := printMarkdown(f, stdout); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		return 0
	}
	return measure(f)
}

// printMarkdown prints the results in --markdown's file, and draws their
// growth plot with --growth-plot.
func printMarkdown(f *flags, stdout io.Writer) error {
	r, err := measure.ReadResults(f.markdown)
	if err != nil {
		return err
	}
	report.PrintMarkdown(r, stdout)
	if f.growthPlot != "" {
		return report.WriteGrowthPlot(r, f.growthPlot)
	}
	return nil
}

// measureAll runs the benchmark in the test world's network namespace and
// reports what it measured, also when a mode failed.
func measureAll(f *flags) int {
	return world.Run(f.NodeBinary == "", func() error {
		res, err := scenario.Run(&f.Options, "go run ./hack/bench "+strings.Join(f.args, " "))
		if res == nil {
			return err
		}
		report.Finish(res)
		report.PrintTable(res, os.Stdout)
		if f.growthPlot != "" {
			if err := report.WriteGrowthPlot(res, f.growthPlot); err != nil {
				return err
			}
			logf("growth plot written to %s", f.growthPlot)
		}
		fmt.Printf("load average before %s, after %s; took %s\n", res.LoadBefore, res.LoadAfter, res.Finished.Sub(res.Started).Round(time.Second))
		if f.out != "" {
			if err := res.Write(f.out); err != nil {
				return err
			}
			logf("results written to %s", f.out)
		}
		return err
	})
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// What an invocation measures, its defaults and their checks.

package scenario

import (
	"errors"
	"fmt"
	"time"

	"flotilla.io/flotilla/hack/bench/world"
)

// Options are what an invocation measures and how; the bench's flags set
// them (see hack/bench/main.go for what each means).
type Options struct {
	Replicas        int
	Runs            int
	Pin             bool
	Members         int
	NodesPerCluster int
	ClientQPS       float32
	ClientBurst     int
	Modes           string
	Scenarios       string
	ProbePods       int
	ProbeInterval   time.Duration
	ProbeSettle     time.Duration
	SteadyRate      float64
	SteadyDuration  time.Duration
	NoisePods       int
	FootprintPods   int
	HostSecrets     int
	MemberPods      int
	ExportedPods    int
	ExportedFlips   int
	HostSecretKiB   int
	GrowthPods      string
	IdleWindow      time.Duration
	Settle          time.Duration
	PhaseTimeout    time.Duration
	Timeout         time.Duration
	KeepDir         string
	ProfileDir      string
	ProfileDuration time.Duration
	NodeArgs        []string
	NodeBinary      string
	ScalePartitions int
	ScaleNodes      int
	ScalePods       int
	ScaleObserve    time.Duration
	ScaleTimeout    time.Duration
	MembersCount    int
	MembersIdle     time.Duration
}

// Validate rejects options no run can be made of.
func (o *Options) Validate() error {
	switch {
	case o.Replicas < 1 || o.Runs < 1 || o.Members < 1 || o.NodesPerCluster < 1 || o.ProbePods < 1 ||
		o.NoisePods < 1 || o.FootprintPods < 1 || o.HostSecrets < 1 || o.MemberPods < 1 || o.ExportedPods < 1 || o.ScalePartitions < 1 || o.ScalePods < 1 || o.MembersCount < 1:
		return errors.New("--replicas, --runs, --members, --nodes-per-cluster, --probe-pods, --noise-pods, --footprint-pods, --host-secrets, --member-pods, --exported-pods, --scale-partitions, --scale-pods and --members-count must be at least 1")
	case o.HostSecretKiB < 1 || o.HostSecretKiB > 1024:
		return errors.New("--host-secret-kib must be from 1 to 1024 (a Secret holds at most 1 MiB)")
	case o.ExportedFlips < 1 || o.ExportedFlips > o.ExportedPods:
		return errors.New("--exported-flips must be from 1 to --exported-pods")
	case o.MembersIdle < time.Second:
		return errors.New("--members-idle must be at least 1s")
	case o.SteadyRate <= 0 || o.SteadyRate > 1000 || steadyPods(o) < 1:
		return errors.New("--steady-rate must be above 0 and at most 1000 a second, and times --steady-duration at least one pod")
	case o.ScaleNodes < o.ScalePartitions:
		return errors.New("--scale-nodes must be at least --scale-partitions: every partition needs a node")
	case o.Pin && !world.Pinnable():
		return fmt.Errorf("--pin needs CPUs %d and %d", world.HostCPU, world.MemberCPU)
	}
	if _, err := selectModes(o.Modes); err != nil {
		return err
	}
	if _, _, err := selectScenarios(o.Scenarios); err != nil {
		return err
	}
	if _, err := growthSizes(o.GrowthPods); err != nil {
		return err
	}
	return nil
}

// world is what the worlds of the modes are made of: every kwok node able
// to hold the most pods any selected scenario has at once.
func (o *Options) world() world.Options {
	return world.Options{
		Members: o.Members, NodesPerCluster: o.NodesPerCluster, PeakPods: peakPods(o),
		ClientQPS: o.ClientQPS, ClientBurst: o.ClientBurst,
		Pin: o.Pin, NodeArgs: o.NodeArgs, Profile: o.ProfileDir != "",
	}
}

// Defaults are the options of a plain `go run ./hack/bench`: the default
// benchmark, about half an hour on an idle 2-CPU machine.
func Defaults() Options {
	return Options{
		Replicas: 1000, Runs: 3, Members: 3, NodesPerCluster: 3,
		ClientQPS: 500, ClientBurst: 1000,
		Modes: "native,direct,flotilla", Scenarios: DefaultScenarios,
		ProbePods: 100, ProbeInterval: 50 * time.Millisecond, ProbeSettle: 10 * time.Second,
		SteadyRate: 20, SteadyDuration: time.Minute,
		NoisePods: 1000, FootprintPods: 10000,
		HostSecrets: 100, HostSecretKiB: 256, MemberPods: 2000,
		ExportedPods: 1000, ExportedFlips: 20,
		GrowthPods: "1000,5000,10000",
		IdleWindow: 15 * time.Second, Settle: 10 * time.Second,
		PhaseTimeout: 10 * time.Minute, Timeout: time.Hour,
		ProfileDuration: time.Minute,
		ScalePartitions: 50, ScaleNodes: 500, ScalePods: 500,
		ScaleObserve: 2 * time.Minute, ScaleTimeout: 14 * time.Minute,
		MembersCount: 20, MembersIdle: time.Minute,
	}
}

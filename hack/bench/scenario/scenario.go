// The scenarios and modes an invocation selects.

package scenario

import (
	"context"
	"fmt"
	"strings"

	"flotilla.io/flotilla/hack/bench/measure"
)

// scenario is one workload the bench measures in every mode, in a file of
// its own. Each run of a mode calls every scenario that applies to it, in
// order, on the same prepared world, and the scenario adds its metrics to
// the run's sample. Scenarios that need a world of their own shape run once
// per invocation instead, after the modes: scale (scale.go, 50 partitions
// over 500 nodes) and members (members.go, 20 members with a flotilla-node
// each, against a native host of as many nodes). A scenario that runs
// alongside another workload drives it through runDeployment's
// workloadHooks (noise.go: a member's own churn during a burst).
type scenario interface {
	name() string
	// applies reports whether the scenario means anything in mode m.
	applies(m measure.Mode) bool
	// peakPods is the most pods the scenario has at once in one cluster,
	// which every fake node must be able to hold (see world.NodeSpecs).
	peakPods(o *Options) int
	// run measures once; run counts from 1.
	run(ctx context.Context, t *target, run int, s measure.Sample) error
}

// allScenarios is every per-mode scenario. The footprint (measure.Meter) is
// measured during the burst; footprint10k is the footprint with many more
// pods, and growth the footprint at several sizes: both take many minutes.
var allScenarios = []scenario{burst{}, propagation{}, steady{}, noise{}, footprint10k{}, growth{}, hostSecrets{}, memberPods{}, exported{}}

// DefaultScenarios are the scenarios an invocation runs unless told
// otherwise: all but footprint10k, growth, scale and members, which take
// many minutes each.
const DefaultScenarios = "burst,propagation,steady,noise"

// scaleScenario and membersScenario are the names of the scenarios that
// run in worlds of their own (see scale.go and members.go).
const (
	scaleScenario   = "scale"
	membersScenario = "members"
)

// ownWorlds says which scenarios that run in worlds of their own, after
// the modes, a list names.
type ownWorlds struct {
	scale, members bool
}

// selectScenarios returns the per-mode scenarios named in a comma-separated
// list, and which scenarios of worlds of their own it names.
func selectScenarios(list string) ([]scenario, ownWorlds, error) {
	byName := map[string]scenario{}
	names := []string{}
	for _, s := range allScenarios {
		byName[s.name()] = s
		names = append(names, s.name())
	}
	names = append(names, scaleScenario, membersScenario)
	var out []scenario
	var own ownWorlds
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		switch n {
		case scaleScenario:
			own.scale = true
			continue
		case membersScenario:
			own.members = true
			continue
		}
		s, ok := byName[n]
		if !ok {
			return nil, ownWorlds{}, fmt.Errorf("unknown scenario %q; have %s", n, strings.Join(names, ", "))
		}
		out = append(out, s)
	}
	return out, own, nil
}

// peakPods is the most pods any scenario of --scenarios has at once in one
// cluster; --scenarios must be valid. (world.NodeSpecs leaves room for the
// warm-up's few.)
func peakPods(o *Options) int {
	scenarios, _, _ := selectScenarios(o.Scenarios)
	n := 0
	for _, s := range scenarios {
		n = max(n, s.peakPods(o))
	}
	return n
}

// selectModes returns the modes named in a comma-separated list, in the
// bench's order.
func selectModes(list string) ([]measure.Mode, error) {
	want := map[measure.Mode]bool{}
	for _, n := range strings.Split(list, ",") {
		m := measure.Mode(strings.TrimSpace(n))
		found := false
		for _, k := range measure.Modes {
			found = found || k == m
		}
		if !found {
			return nil, fmt.Errorf("unknown mode %q; have native, direct, flotilla", n)
		}
		want[m] = true
	}
	var out []measure.Mode
	for _, m := range measure.Modes {
		if want[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

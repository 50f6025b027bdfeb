package main

import (
	"context"
	"fmt"
	"strings"
)

// scenario is one workload the bench measures, in a file of its own. Each
// run of a mode calls every scenario that applies to it, in order, on the
// same prepared world, and the scenario adds its metrics to the run's
// sample. Scenarios that need a world of their own shape (scale: 50
// partitions over 500 nodes) or run alongside another (noise: member churn
// during the burst) are meant to slot in here, with worldConfig and
// runDeployment growing the hooks they need.
type scenario interface {
	name() string
	// applies reports whether the scenario means anything in mode m.
	applies(m mode) bool
	// run measures once; run counts from 1.
	run(ctx context.Context, t *target, run int, s sample) error
}

// allScenarios is every scenario in the order runs perform them. The
// footprint (footprint.go) is measured during the burst.
var allScenarios = []scenario{burst{}, propagation{}}

// selectScenarios returns the scenarios named in a comma-separated list.
func selectScenarios(list string) ([]scenario, error) {
	byName := map[string]scenario{}
	var names []string
	for _, s := range allScenarios {
		byName[s.name()] = s
		names = append(names, s.name())
	}
	var out []scenario
	for _, n := range strings.Split(list, ",") {
		s, ok := byName[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("unknown scenario %q; have %s", n, strings.Join(names, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

// selectModes returns the modes named in a comma-separated list, in the
// bench's order.
func selectModes(list string) ([]mode, error) {
	want := map[mode]bool{}
	for _, n := range strings.Split(list, ",") {
		m := mode(strings.TrimSpace(n))
		found := false
		for _, k := range allModes {
			found = found || k == m
		}
		if !found {
			return nil, fmt.Errorf("unknown mode %q; have native, direct, flotilla", n)
		}
		want[m] = true
	}
	var out []mode
	for _, m := range allModes {
		if want[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

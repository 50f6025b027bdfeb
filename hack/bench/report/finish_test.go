// Tests of medians, ratios and derived figures.

package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"flotilla.io/flotilla/hack/bench/measure"
	"github.com/google/go-cmp/cmp"
)

func TestResultsFinish(t *testing.T) {
	r := &measure.Results{Modes: map[measure.Mode]*measure.ModeResult{
		measure.ModeNative:   {Runs: []measure.Sample{{"burst.ready_s": 10, "api.writes_per_pod": 7}, {"burst.ready_s": 12, "api.writes_per_pod": 7}, {"burst.ready_s": 11, "api.writes_per_pod": 7}}},
		measure.ModeDirect:   {Runs: []measure.Sample{{"burst.ready_s": 8, "api.writes_per_pod": 7.5}}},
		measure.ModeFlotilla: {Runs: []measure.Sample{{"burst.ready_s": 22, "api.writes_per_pod": 10, "propagation.status_p99_s": 0.1}}},
	}}
	Finish(r)
	if diff := cmp.Diff(measure.RatioPair{FlotillaNative: 2, FlotillaDirect: 2.75}, r.Ratios["burst.ready_s"]); diff != "" {
		t.Errorf("burst ratio (-want +got):\n%s", diff)
	}
	if _, ok := r.Ratios["propagation.status_p99_s"]; ok {
		t.Error("propagation has no baseline and must have no ratio")
	}
	want := map[string]float64{
		"api.extra_writes_per_forwarded_pod_vs_direct": 2.5,
		"api.extra_writes_per_forwarded_pod_vs_native": 3,
	}
	if diff := cmp.Diff(want, r.Derived); diff != "" {
		t.Errorf("derived (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	r.Options = map[string]string{"members": "3", "replicas": "1000", "runs": "3"}
	r.Placement = "shared"
	PrintTable(r, &out)
	for _, want := range []string{"burst: all pods Running+Ready (s)", "11.00", "22.00", "2.00", "2.75"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	PrintMarkdown(r, &out)
	if want := "| burst: all pods Running+Ready (s) | 11.00 | 8.00 | 22.00 | 2.00 | 2.75 |"; !strings.Contains(out.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, out.String())
	}
}

func TestResultsFinishScenarios(t *testing.T) {
	r := &measure.Results{Modes: map[measure.Mode]*measure.ModeResult{
		measure.ModeNative: {Runs: []measure.Sample{{"steady.startup_p99_s": 1.5}, {"steady.startup_p99_s": 1.0}, {"steady.startup_p99_s": 2.0}}},
		measure.ModeDirect: {Runs: []measure.Sample{{"steady.startup_p99_s": 1.2, "noise.burst_ratio": 1.1, "noise.create_ratio": 1.4}}},
		measure.ModeFlotilla: {Runs: []measure.Sample{{"steady.startup_p99_s": 1.8, "noise.burst_ratio": 1.05, "noise.create_ratio": 1.2,
			"footprint10k.pods": 10000, "footprint10k.footprint.loaded_node_rss_mib": 140}}},
	}, Options: map[string]string{"members": "3", "replicas": "1000", "runs": "3"}, Placement: "shared"}
	Finish(r)
	if diff := cmp.Diff(measure.RatioPair{FlotillaNative: 1.2, FlotillaDirect: 1.5}, r.Ratios["steady.startup_p99_s"], cmp.Comparer(approx)); diff != "" {
		t.Errorf("steady ratio (-want +got):\n%s", diff)
	}
	if _, ok := r.Ratios["noise.burst_ratio"]; ok {
		t.Error("noise's ratios are within a mode and must have no ratio across modes")
	}
	want := map[string]float64{
		"steady.startup_p99_flotilla_minus_native_s": 0.3,
		"steady.startup_p99_flotilla_minus_direct_s": 0.6,
	}
	if diff := cmp.Diff(want, r.Derived, cmp.Comparer(approx)); diff != "" {
		t.Errorf("derived (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	PrintMarkdown(r, &out)
	for _, want := range []string{
		"| steady: pod startup p99 (s) | 1.50 | 1.20 | 1.80 | 1.20 | 1.50 |",
		"| noise: burst Ready, with / without noise | - | 1.10 | 1.05 | - | - |",
		"| footprint10k: flotilla-node RSS with the pods (MiB, largest) | - | - | 140.0 | - | - |",
		"- steady.startup_p99_flotilla_minus_native_s: 0.30",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, out.String())
		}
	}
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

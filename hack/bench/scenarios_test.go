package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAddPercentiles(t *testing.T) {
	s := sample{}
	addPercentiles(s, "steady.startup", seq(100), 50, 90, 99)
	want := sample{"steady.startup_p50_s": 50, "steady.startup_p90_s": 90, "steady.startup_p99_s": 99, "steady.startup_count": 100}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("percentiles (-want +got):\n%s", diff)
	}
	empty := sample{}
	addPercentiles(empty, "x", nil, 99)
	if !math.IsNaN(empty["x_p99_s"]) || empty["x_count"] != 0 {
		t.Errorf("no values: %v", empty)
	}
	if diff := cmp.Diff(sample{"x_count": 0}, empty.clean()); diff != "" {
		t.Errorf("clean drops the NaN percentile (-want +got):\n%s", diff)
	}
}

func TestPaceOpen(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("keeps the pace", func(t *testing.T) {
		var calls atomic.Int32
		p, err := paceOpen(ctx, names, 20*time.Millisecond, len(names), func(context.Context, string) error {
			calls.Add(1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if calls.Load() != int32(len(names)) || len(p.starts) != len(names) {
			t.Fatalf("%d calls, %d starts; want %d", calls.Load(), len(p.starts), len(names))
		}
		// Five intervals from the first call to the last, give or take a
		// busy machine's scheduling.
		if d := p.last.Sub(p.first); d < 5*20*time.Millisecond-5*time.Millisecond {
			t.Errorf("calls spread over %s, want about 100ms", d)
		}
		if got := (pacing{starts: p.starts, first: p.first, last: p.first.Add(100 * time.Millisecond), interval: 20 * time.Millisecond}).behind(); got != 0 {
			t.Errorf("behind = %s on schedule, want 0", got)
		}
		if got := (pacing{starts: p.starts, first: p.first, last: p.first.Add(160 * time.Millisecond), interval: 20 * time.Millisecond}).behind(); got != 60*time.Millisecond {
			t.Errorf("behind = %s three ticks late, want 60ms", got)
		}
		for _, n := range names {
			if p.starts[n].Before(p.first) || p.starts[n].After(p.last.Add(time.Second)) {
				t.Errorf("start of %s = %s, outside %s..%s", n, p.starts[n], p.first, p.last)
			}
		}
	})

	t.Run("slow calls do not hold up the next", func(t *testing.T) {
		p, err := paceOpen(ctx, names, 10*time.Millisecond, len(names), func(ctx context.Context, _ string) error {
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond): // a slow create
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// 50ms at the pace; one after the other would take 1.5s.
		if d := p.last.Sub(p.first); d > 250*time.Millisecond {
			t.Errorf("calls spread over %s; slow calls held up the pace", d)
		}
	})

	t.Run("falling behind is recorded", func(t *testing.T) {
		p, err := paceOpen(ctx, names, time.Millisecond, 1, func(ctx context.Context, _ string) error {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond): // slower than the pace, one at a time
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Six calls of 20ms one after the other: the last ~95ms behind, the
		// calls ~20ms apart instead of 1ms.
		if p.behind() < 50*time.Millisecond || p.maxGap < 15*time.Millisecond {
			t.Errorf("behind %s, longest gap %s; want ~95ms and ~20ms", p.behind(), p.maxGap)
		}
		s := sample{}
		p.report(s, "steady")
		if s["steady.ticks_missed"] < 50 || s["steady.rate_per_s"] > 60 || s["steady.behind_s"] != p.behind().Seconds() {
			t.Errorf("report = %v; want ~95 ticks missed and a rate under 50/s", s)
		}
	})

	t.Run("the first error stops it", func(t *testing.T) {
		boom := errors.New("boom")
		var calls atomic.Int32
		_, err := paceOpen(ctx, names, time.Millisecond, 1, func(_ context.Context, n string) error {
			calls.Add(1)
			if n == "b" {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
		if calls.Load() > 3 {
			t.Errorf("%d calls after an error on the second", calls.Load())
		}
	})
}

func TestPeakPods(t *testing.T) {
	tests := map[string]struct {
		scenarios string
		want      int
	}{
		"burst":                   {"burst", 1000},
		"propagation alone":       {"propagation", 100},
		"steady":                  {"steady", 1200},
		"noise adds to the burst": {"burst,noise", 2000},
		"footprint10k":            {"burst,footprint10k", 10000},
		"scale needs no mode":     {"scale", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := parseFlags([]string{"--scenarios=" + tc.scenarios})
			if err != nil {
				t.Fatal(err)
			}
			if got := peakPods(o); got != tc.want {
				t.Errorf("peakPods = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestResultsFinishScenarios(t *testing.T) {
	r := &results{Modes: map[mode]*modeResult{
		modeNative: {Runs: []sample{{"steady.startup_p99_s": 1.5}, {"steady.startup_p99_s": 1.0}, {"steady.startup_p99_s": 2.0}}},
		modeDirect: {Runs: []sample{{"steady.startup_p99_s": 1.2, "noise.burst_ratio": 1.1, "noise.create_ratio": 1.4}}},
		modeFlotilla: {Runs: []sample{{"steady.startup_p99_s": 1.8, "noise.burst_ratio": 1.05, "noise.create_ratio": 1.2,
			"footprint10k.pods": 10000, "footprint10k.footprint.loaded_node_rss_mib": 140}}},
	}, Options: map[string]string{"members": "3", "replicas": "1000", "runs": "3"}, Placement: "shared"}
	r.finish()
	if diff := cmp.Diff(ratioPair{FlotillaNative: 1.2, FlotillaDirect: 1.5}, r.Ratios["steady.startup_p99_s"], cmp.Comparer(approx)); diff != "" {
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
	r.printMarkdown(&out)
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

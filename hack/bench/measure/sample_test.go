// Tests of medians, percentiles and latencies.

package measure

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestMedianAndPercentile(t *testing.T) {
	tests := map[string]struct {
		vs          []float64
		median, p99 float64
		p50         float64
	}{
		"odd":      {vs: []float64{3, 1, 2}, median: 2, p50: 2, p99: 3},
		"even":     {vs: []float64{4, 1, 3, 2}, median: 2.5, p50: 2, p99: 4},
		"one":      {vs: []float64{7}, median: 7, p50: 7, p99: 7},
		"hundred":  {vs: seq(100), median: 50.5, p50: 50, p99: 99},
		"thousand": {vs: seq(1000), median: 500.5, p50: 500, p99: 990},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Median(tc.vs); got != tc.median {
				t.Errorf("median = %v, want %v", got, tc.median)
			}
			if got := Percentile(tc.vs, 50); got != tc.p50 {
				t.Errorf("p50 = %v, want %v", got, tc.p50)
			}
			if got := Percentile(tc.vs, 99); got != tc.p99 {
				t.Errorf("p99 = %v, want %v", got, tc.p99)
			}
		})
	}
	if !math.IsNaN(Median(nil)) || !math.IsNaN(Percentile(nil, 99)) {
		t.Error("want NaN for no values")
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(n - i) // reversed, so sorting matters
	}
	return out
}

func TestLatencies(t *testing.T) {
	t0 := time.Unix(1000, 0)
	start := map[string]time.Time{"a": t0, "b": t0, "c": t0}
	end := map[string]time.Time{"a": t0.Add(time.Second), "b": t0.Add(250 * time.Millisecond), "d": t0}
	got := Latencies(start, end)
	if diff := cmp.Diff([]float64{0.25, 1}, got, cmpopts.SortSlices(func(a, b float64) bool { return a < b })); diff != "" {
		t.Errorf("latencies (-want +got):\n%s", diff)
	}
}

func TestAddPercentiles(t *testing.T) {
	s := Sample{}
	AddPercentiles(s, "steady.startup", seq(100), 50, 90, 99)
	want := Sample{"steady.startup_p50_s": 50, "steady.startup_p90_s": 90, "steady.startup_p99_s": 99, "steady.startup_count": 100}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("percentiles (-want +got):\n%s", diff)
	}
	empty := Sample{}
	AddPercentiles(empty, "x", nil, 99)
	if !math.IsNaN(empty["x_p99_s"]) || empty["x_count"] != 0 {
		t.Errorf("no values: %v", empty)
	}
	if diff := cmp.Diff(Sample{"x_count": 0}, empty.Clean()); diff != "" {
		t.Errorf("clean drops the NaN percentile (-want +got):\n%s", diff)
	}
}

// Tests of the line fit and the growth plot.

package report

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flotilla.io/flotilla/hack/bench/measure"
)

func TestFitLine(t *testing.T) {
	l := fitLine([]float64{1000, 5000, 10000}, []float64{12, 52, 102})
	if math.Abs(l.slope-0.01) > 1e-9 || math.Abs(l.intercept-2) > 1e-9 || math.Abs(l.r2-1) > 1e-9 {
		t.Errorf("points on y = 2 + 0.01x fitted as %+v", l)
	}
	if l := fitLine([]float64{1000, 5000, 10000}, []float64{10, 90, 20}); l.r2 > 0.5 {
		t.Errorf("points far off any line fitted with r² %.2f", l.r2)
	}
}

// TestGrowthPlot: the plot shows one point per size and series, and the
// fit the results report.
func TestGrowthPlot(t *testing.T) {
	median := measure.Sample{}
	for n, v := range map[string][3]float64{"1000": {3, 50, 60}, "5000": {11, 90, 110}, "10000": {21, 140, 170}} {
		median[measure.GrowthPrefix+n+".node_cpu_s"] = v[0]
		median[measure.GrowthPrefix+n+".node_rss_mib"] = v[1]
		median[measure.GrowthPrefix+n+".node_peak_rss_mib"] = v[2]
	}
	derived := map[string]float64{}
	finishGrowth(median, derived)
	if got := derived["growth.node_cpu_s.slope_per_1000_pods"]; math.Abs(got-2) > 1e-9 {
		t.Errorf("CPU slope per 1,000 pods = %v, want 2", got)
	}
	path := filepath.Join(t.TempDir(), "growth.svg")
	if err := drawGrowthPlot(path, median, "go run ./hack/bench --scenarios growth"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	if n := strings.Count(svg, "<circle"); n != 9 {
		t.Errorf("%d points drawn, want 3 sizes x 3 series", n)
	}
	if !strings.Contains(svg, "2.00 CPU-s per 1,000 pods + 1.0") {
		t.Errorf("the CPU fit is not written on the plot:\n%s", svg)
	}
	if err := drawGrowthPlot(path, measure.Sample{}, ""); err == nil {
		t.Error("a plot drawn from results without the growth scenario")
	}
}

// The growth scenario's fitted lines and its SVG plot.

package report

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"flotilla.io/flotilla/hack/bench/measure"
)

// WriteGrowthPlot draws the growth scenario's flotilla median into an SVG
// file at path (--growth-plot).
func WriteGrowthPlot(r *measure.Results, path string) error {
	return drawGrowthPlot(path, r.Median(measure.ModeFlotilla), r.Command)
}

// line is a least-squares fit y = intercept + slope x, with r2 its
// coefficient of determination (1 for points on the line).
type line struct{ slope, intercept, r2 float64 }

func fitLine(xs, ys []float64) line {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return line{intercept: sy / n, r2: math.NaN()}
	}
	l := line{slope: (n*sxy - sx*sy) / den}
	l.intercept = (sy - l.slope*sx) / n
	mean := sy / n
	var ssRes, ssTot float64
	for i := range xs {
		d := ys[i] - (l.intercept + l.slope*xs[i])
		ssRes += d * d
		ssTot += (ys[i] - mean) * (ys[i] - mean)
	}
	l.r2 = 1
	if ssTot > 0 {
		l.r2 = 1 - ssRes/ssTot
	}
	return l
}

// growthSeries are the series growth measures, each with its unit; fitted
// slopes are reported per 1,000 pods.
var growthSeries = []struct {
	key, title, unit, slopeUnit string
	// target is the bound flotilla-node is held to: the cost at pods pods.
	target func(pods float64) float64
}{
	{"node_cpu_s", "CPU, create + delete", "CPU-s", "CPU-s per 1,000 pods", func(pods float64) float64 { return 2 * pods / 1000 }},
	{"node_rss_mib", "RSS with the pods forwarded", "MiB", "MiB per 1,000 pods", func(float64) float64 { return 150 }},
	{"node_peak_rss_mib", "peak RSS", "MiB", "MiB per 1,000 pods", func(float64) float64 { return 200 }},
}

// growthPoints returns the sizes measured in s and each series' values.
func growthPoints(s measure.Sample) (sizes []int, values map[string][]float64) {
	values = map[string][]float64{}
	for k := range s {
		rest, ok := strings.CutPrefix(k, measure.GrowthPrefix)
		if !ok {
			continue
		}
		num, metric, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || metric != "node_cpu_s" {
			continue
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	for _, g := range growthSeries {
		for _, n := range sizes {
			values[g.key] = append(values[g.key], s[measure.GrowthPrefix+strconv.Itoa(n)+"."+g.key])
		}
	}
	return sizes, values
}

// finishGrowth fits each series of the flotilla median and adds slope,
// intercept and r² to derived.
func finishGrowth(median measure.Sample, derived map[string]float64) {
	sizes, values := growthPoints(median)
	if len(sizes) < 2 {
		return
	}
	xs := make([]float64, len(sizes))
	for i, n := range sizes {
		xs[i] = float64(n)
	}
	for _, g := range growthSeries {
		l := fitLine(xs, values[g.key])
		derived["growth."+g.key+".slope_per_1000_pods"] = l.slope * 1000
		derived["growth."+g.key+".intercept"] = l.intercept
		derived["growth."+g.key+".r2"] = l.r2
	}
}

// drawGrowthPlot draws each series of the flotilla median against pods,
// with its fitted line, as one SVG file: a figure a reader takes in at a
// glance, made by the bench from the numbers it reports.
func drawGrowthPlot(path string, median measure.Sample, command string) error {
	sizes, values := growthPoints(median)
	if len(sizes) < 2 {
		return fmt.Errorf("growth plot: the results hold %d sizes of the growth scenario, need at least 2", len(sizes))
	}
	const (
		panelW, panelH = 300.0, 220.0
		left, top      = 60.0, 50.0
		gap            = 70.0
	)
	width := left + float64(len(growthSeries))*(panelW+gap)
	height := top + panelH + 90
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15">flotilla-node cost against pods forwarded (one process; points measured, blue lines fitted, dashed green: the target)</text>`+"\n", left)
	xMax := float64(slices.Max(sizes)) * 1.05
	for i, g := range growthSeries {
		x0 := left + float64(i)*(panelW+gap)
		ys := values[g.key]
		xs := make([]float64, len(sizes))
		for j, n := range sizes {
			xs[j] = float64(n)
		}
		l := fitLine(xs, ys)
		yMax := niceCeil(max(slices.Max(ys), l.intercept+l.slope*xMax, g.target(xMax)) * 1.1)
		px := func(x float64) float64 { return x0 + x/xMax*panelW }
		py := func(y float64) float64 { return top + panelH - y/yMax*panelH }
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", x0, top-10, g.title)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, top+panelH, x0+panelW, top+panelH)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, top, x0, top+panelH)
		for k := 0; k <= 4; k++ {
			y := yMax * float64(k) / 4
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, py(y), x0+panelW, py(y))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-5, py(y)+4, trimFloat(y))
		}
		for _, n := range sizes {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", px(float64(n)), top+panelH+16, n)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">pods</text>`+"\n", x0+panelW/2, top+panelH+32)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
			x0-42, top+panelH/2, x0-42, top+panelH/2, g.unit)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#1f77b4" stroke-width="2"/>`+"\n",
			px(0), py(l.intercept), px(xMax), py(l.intercept+l.slope*xMax))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#2ca02c" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n",
			px(0), py(g.target(0)), px(xMax), py(g.target(xMax)))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#2ca02c" text-anchor="end">target</text>`+"\n", px(xMax)-2, py(g.target(xMax))-4)
		for j, n := range sizes {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="#d62728"><title>%d pods: %.1f %s</title></circle>`+"\n",
				px(float64(n)), py(ys[j]), n, ys[j], g.unit)
		}
		sign := "+"
		if l.intercept < 0 {
			sign = "−"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%.2f %s %s %.1f (r² %.3f)</text>`+"\n",
			x0, top+panelH+52, l.slope*1000, g.slopeUnit, sign, math.Abs(l.intercept), l.r2)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#555">%s</text>`+"\n", left, height-10, svgEscape(command))
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func svgEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

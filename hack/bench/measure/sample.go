// One run's figures, and the statistics over runs and pods.

package measure

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// Sample holds one run's measurements, keyed by metric name; names carry
// their unit as a suffix (_s seconds, _mib, _millicores, _per_pod ...).
type Sample map[string]float64

// Prefixes of the metrics of the scenarios that keep theirs apart from the
// burst's: growth.<pods>.<metric>, footprint10k.<burst metric>,
// hostsecrets.<metric>, memberpods.<metric> and exported.<metric>.
const (
	GrowthPrefix       = "growth."
	Footprint10kPrefix = "footprint10k."
	HostSecretsPrefix  = "hostsecrets."
	MemberPodsPrefix   = "memberpods."
	ExportedPrefix     = "exported."
)

// Median returns the median of vs, or NaN when there are none.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// vs, or NaN when there are none: the smallest value that at least p% of
// the values do not exceed.
func Percentile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// MedianSample returns, per metric, the median over the runs that have it.
func MedianSample(runs []Sample) Sample {
	values := map[string][]float64{}
	for _, r := range runs {
		for k, v := range r {
			if !math.IsNaN(v) {
				values[k] = append(values[k], v)
			}
		}
	}
	out := Sample{}
	for k, vs := range values {
		out[k] = Median(vs)
	}
	return out
}

// Seconds converts a duration for a sample.
func Seconds(d time.Duration) float64 { return d.Seconds() }

// Latencies returns end[k]-start[k] in seconds for every key in both maps
// where end is set.
func Latencies(start, end map[string]time.Time) []float64 {
	var out []float64
	for k, t0 := range start {
		if t1, ok := end[k]; ok && !t1.IsZero() {
			out = append(out, t1.Sub(t0).Seconds())
		}
	}
	return out
}

// AddPercentiles records the given nearest-rank percentiles of vs, in
// seconds, as <prefix>_p<p>_s, and how many values there were as
// <prefix>_count; percentiles of no values are NaN, which the sample drops.
func AddPercentiles(s Sample, prefix string, vs []float64, ps ...float64) {
	for _, p := range ps {
		s[prefix+"_p"+strconv.FormatFloat(p, 'f', -1, 64)+"_s"] = Percentile(vs, p)
	}
	s[prefix+"_count"] = float64(len(vs))
}

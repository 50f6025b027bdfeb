// Medians, ratios and derived figures of the results.

package report

import "flotilla.io/flotilla/hack/bench/measure"

// Finish computes the medians, ratios and derived figures of what Run
// measured, the members scenario's too; the results written by --out hold
// them, so a report read back from a file needs no Finish.
func Finish(r *measure.Results) {
	if r.Members != nil {
		finishMembers(r.Members)
	}
	for _, mr := range r.Modes {
		mr.Median = measure.MedianSample(mr.Runs)
	}
	r.Ratios = map[string]measure.RatioPair{}
	fl := r.Median(measure.ModeFlotilla)
	for _, row := range tableRows {
		if !row.ratio {
			continue
		}
		v, ok := fl[row.key]
		if !ok {
			continue
		}
		r.Ratios[row.key] = measure.RatioPair{
			FlotillaNative: ratio(v, r.Median(measure.ModeNative), row.key),
			FlotillaDirect: ratio(v, r.Median(measure.ModeDirect), row.key),
		}
	}
	r.Derived = map[string]float64{}
	finishGrowth(fl, r.Derived)
	if d, ok := r.Median(measure.ModeDirect)["api.writes_per_pod"]; ok {
		if f, ok := fl["api.writes_per_pod"]; ok {
			// What the member itself does for a pod is what a direct create
			// costs; the rest is flotilla's.
			r.Derived["api.extra_writes_per_forwarded_pod_vs_direct"] = f - d
		}
	}
	if n, ok := r.Median(measure.ModeNative)["api.writes_per_pod"]; ok {
		if f, ok := fl["api.writes_per_pod"]; ok {
			r.Derived["api.extra_writes_per_forwarded_pod_vs_native"] = f - n
		}
	}
	// The steady scenario is judged by an absolute margin: flotilla's p99
	// startup above native's and direct's.
	for _, base := range []measure.Mode{measure.ModeNative, measure.ModeDirect} {
		if b, ok := r.Median(base)["steady.startup_p99_s"]; ok {
			if f, ok := fl["steady.startup_p99_s"]; ok {
				r.Derived["steady.startup_p99_flotilla_minus_"+string(base)+"_s"] = f - b
			}
		}
	}
}

func ratio(v float64, base measure.Sample, key string) float64 {
	b, ok := base[key]
	if !ok || b == 0 {
		return 0
	}
	return v / b
}

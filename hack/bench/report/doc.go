// Package report turns the bench's results (measure.Results) into what a
// reader sees: medians, ratios and derived figures (Finish), aligned text
// tables, the Markdown tables of BENCHMARKS.md, and the growth plot, an
// SVG of flotilla-node's cost against pods with fitted lines.
package report

// The results as the Markdown tables of BENCHMARKS.md.

package report

import (
	"fmt"
	"io"
	"strings"

	"flotilla.io/flotilla/hack/bench/measure"
)

// PrintMarkdown writes the medians and ratios, and the scale scenario, as
// Markdown tables for BENCHMARKS.md.
func PrintMarkdown(r *measure.Results, out io.Writer) {
	if len(r.Modes) > 0 {
		printModesMarkdown(r, out)
	}
	if r.Scale != nil {
		if len(r.Modes) > 0 {
			fmt.Fprintln(out)
		}
		printScaleMarkdown(r.Scale, out)
	}
	if r.Members != nil {
		if len(r.Modes) > 0 || r.Scale != nil {
			fmt.Fprintln(out)
		}
		printMembersMarkdown(r.Members, out)
	}
}

func printModesMarkdown(r *measure.Results, out io.Writer) {
	fmt.Fprintf(out, "| metric | native | direct | flotilla | flotilla/native | flotilla/direct |\n")
	fmt.Fprintf(out, "|---|--:|--:|--:|--:|--:|\n")
	for _, row := range tableRows {
		cells, ok := modeCells(r, row)
		if !ok {
			continue
		}
		fmt.Fprintf(out, "| %s | %s |\n", row.label, strings.Join(cells, " | "))
	}
	if len(r.Derived) > 0 {
		fmt.Fprintln(out)
	}
	for _, k := range sortedKeys(r.Derived) {
		fmt.Fprintf(out, "- %s: %.2f\n", k, r.Derived[k])
	}
}

// Tests of the scale scenario's tables.

package report

import (
	"bytes"
	"strings"
	"testing"

	"flotilla.io/flotilla/hack/bench/measure"
)

func TestScaleReport(t *testing.T) {
	r := &measure.Results{Scale: &measure.ScaleResult{Partitions: 50, Nodes: 500, Pods: 500,
		Baseline: measure.Sample{"watches.member": 7, "watch_detail.member.pods": 1, "watch_detail.member.nodes": 1},
		Scale:    measure.Sample{"watches.member": 7, "heartbeat.idle.max_renew_gap_s": 10.2, "watch_detail.member.pods": 1}}}
	var out bytes.Buffer
	PrintTable(r, &out)
	for _, want := range []string{"1 partition", "50 partitions", "member watches held by flotilla-node", "10.2",
		"member watches of flotilla-node by resource: 1 partition: nodes 1, pods 1; 50 partitions: pods 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "native") {
		t.Errorf("table shows modes that did not run:\n%s", out.String())
	}
	out.Reset()
	PrintMarkdown(r, &out)
	if want := "| member watches held by flotilla-node | 7 | 7 |"; !strings.Contains(out.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, out.String())
	}
}

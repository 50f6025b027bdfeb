// Tests of reading the floor program's memory.

package scenario

import (
	"os"
	"testing"

	"flotilla.io/flotilla/hack/bench/measure"
)

// TestFloorMemory reads a process's RSS as the floor's, and flotilla-node's
// idle RSS over it.
func TestFloorMemory(t *testing.T) {
	s := measure.Sample{"footprint.idle_node_rss_mib": 1000}
	if err := floorMemory(os.Getpid(), s); err != nil {
		t.Fatal(err)
	}
	rss := s["footprint.idle_floor_rss_mib"]
	if rss <= 0 || rss > 1000 {
		t.Fatalf("floor RSS %.1f MiB for this test process", rss)
	}
	if got, want := s["footprint.idle_node_rss_over_floor"], 1000/rss; got != want {
		t.Errorf("over the floor: %.3f, want %.3f", got, want)
	}
	if err := floorMemory(1<<30, measure.Sample{}); err == nil {
		t.Error("want an error for a process that is gone")
	}
}

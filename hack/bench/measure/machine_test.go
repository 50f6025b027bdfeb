// Tests of reading /proc/meminfo.

package measure

import "testing"

func TestMemInfoGiB(t *testing.T) {
	meminfo := []byte("MemTotal:       25165824 kB\nMemFree:        1048576 kB\nMemAvailable:   12582912 kB\n")
	if got := memInfoGiB(meminfo, "MemAvailable"); got != 12 {
		t.Errorf("MemAvailable = %v GiB, want 12", got)
	}
	if got := memInfoGiB(meminfo, "MemTotal"); got != 24 {
		t.Errorf("MemTotal = %v GiB, want 24", got)
	}
	if got := memInfoGiB(meminfo, "SwapTotal"); got != 0 {
		t.Errorf("a missing field = %v, want 0", got)
	}
}

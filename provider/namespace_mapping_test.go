// This file tests the namespace mappings.

package provider

import (
	"strings"
	"testing"
)

func TestSuffix(t *testing.T) {
	m := Suffix("ke-beijing-cluster")
	if got := m("edge"); got != "edge-ke-beijing-cluster" {
		t.Errorf("Suffix = %q", got)
	}
	long := strings.Repeat("a", 60)
	got := m(long)
	if len(got) > 63 || !strings.HasSuffix(got, "-ke-beijing-cluster") {
		t.Errorf("long name mapped to %q (%d chars)", got, len(got))
	}
	if m(long) == m(strings.Repeat("a", 59)+"b") {
		t.Error("two long namespaces map to the same member namespace")
	}
}

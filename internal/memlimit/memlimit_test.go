package memlimit

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestFromFile(t *testing.T) {
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	dir := t.TempDir()
	n := 0
	write := func(s string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("memory.max.%d", n))
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// 1 GiB limit: the runtime gets 90% of it.
	got, err := fromFile(write("1073741824\n"), "")
	if err != nil || got != 966367641 || debug.SetMemoryLimit(-1) != 966367641 {
		t.Errorf("1 GiB: set %d (%v), runtime limit %d", got, err, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(math.MaxInt64)
	for name, tc := range map[string]struct{ path, env string }{
		"no limit":        {write("max\n"), ""},
		"no cgroup v2":    {filepath.Join(dir, "absent"), ""},
		"GOMEMLIMIT wins": {write("1073741824\n"), "200MiB"},
	} {
		if got, err := fromFile(tc.path, tc.env); err != nil || got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
			t.Errorf("%s: set %d (%v), runtime limit %d", name, got, err, debug.SetMemoryLimit(-1))
		}
	}
	if _, err := fromFile(write("lots"), ""); err == nil {
		t.Error("a limit that is not a number was taken")
	}
}

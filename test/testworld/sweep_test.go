package testworld

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestSweepStale: of the directories earlier worlds left behind, a sweep
// removes those whose process has gone and that are over a day old, and
// keeps a running world's, a recent one's, one kept on purpose, one whose
// owner is unknown and anything not a world's.
func TestSweepStale(t *testing.T) {
	root := t.TempDir()
	now := time.Now()
	old := now.Add(-staleAfter - time.Hour)
	const running, gone = 100, 200
	mk := func(name string, owner int, keep bool, mtime time.Time) string {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Join(dir, "host"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != 0 {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(owner)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if keep {
			if err := os.WriteFile(filepath.Join(dir, keepFile), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(dir, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	stale := mk(dirPrefix+"1", gone, false, old)
	mk(dirPrefix+"2", running, false, old) // its world still runs
	mk(dirPrefix+"3", gone, false, now)    // a failed start's logs, fresh
	mk(dirPrefix+"4", gone, true, old)     // FLOTILLA_E2E_KEEP
	mk(dirPrefix+"5", 0, false, old)       // not marked: not known to be ours to remove
	mk("something-else", gone, false, old) // not a world's
	removed, err := sweepStale(root, now, func(pid int) bool { return pid == running })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{stale}) {
		t.Errorf("removed %v, want %v", removed, []string{stale})
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		t.Errorf("%d entries left, want 5", len(entries))
	}
}

// TestMarkDirOwner: a world's directory names this process, so that a
// sweep by a concurrent world leaves it alone.
func TestMarkDirOwner(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, dirPrefix+"1")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := markDir(dir, false); err != nil {
		t.Fatal(err)
	}
	removed, err := sweepStale(root, time.Now().Add(2*staleAfter), processAlive)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(removed, dir) {
		t.Errorf("the directory of a world whose process runs was removed")
	}
}

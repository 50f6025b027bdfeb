package testworld

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dirPrefix names the temporary directories of worlds started without
// Config.Dir.
const dirPrefix = "flotilla-testworld-"

// staleAfter is how long the directory of a world whose process has gone
// is kept for its logs before a later Start removes it.
const staleAfter = 24 * time.Hour

// ownerFile holds the PID of the process whose world uses the directory;
// keepFile marks a directory kept on purpose (Config.KeepDir), which no
// sweep removes.
const (
	ownerFile = "owner.pid"
	keepFile  = "keep"
)

// markDir records who uses a world's temporary directory, and whether it
// is to be kept.
func markDir(dir string, keep bool) error {
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	if keep {
		return os.WriteFile(filepath.Join(dir, keepFile), nil, 0o644)
	}
	return nil
}

// sweepStale removes, under root, the temporary directories of earlier
// worlds that nothing needs any more: a world whose start failed keeps its
// directory for its logs, and one whose process was killed (a test
// timeout) never reaches Stop, and each holds its clusters' etcd data.
// A directory is removed once its owner process is gone and it is older
// than staleAfter; one marked keep, or whose owner is unknown, stays.
func sweepStale(root string, now time.Time, alive func(pid int) bool) (removed []string, err error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if _, err := os.Stat(filepath.Join(dir, keepFile)); err == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || alive(pid) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < staleAfter {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// processAlive reports whether a process pid exists (signal 0 probes it).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// sweepTempDir sweeps the system's temporary directory, reporting what it
// removed through logf; a failure to sweep does not stop a world.
func sweepTempDir(logf func(string, ...any)) {
	removed, err := sweepStale(os.TempDir(), time.Now(), processAlive)
	if len(removed) > 0 {
		logf("testworld: removed %d directories of earlier worlds, gone for over %s: %s", len(removed), staleAfter, strings.Join(removed, ", "))
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		logf("testworld: %v", fmt.Errorf("sweep earlier worlds' directories: %w", err))
	}
}

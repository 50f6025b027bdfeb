// Package memlimit gives the Go runtime a soft memory limit below the
// container's, so that the garbage collector works harder as the process
// nears the limit instead of the kernel killing it there.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Ratio is the share of the container's memory limit the Go runtime is
// held to: the rest is for what the runtime does not count (stacks of
// threads in cgroups' accounting, the page cache of mapped files).
const Ratio = 0.9

// cgroupMax is the cgroup v2 memory limit of this process's container.
const cgroupMax = "/sys/fs/cgroup/memory.max"

// FromCgroup sets the runtime's soft memory limit to Ratio of the
// container's memory limit, unless GOMEMLIMIT is set (the user's word
// wins) or there is no limit. It returns the limit set, 0 for none.
func FromCgroup() (int64, error) {
	return fromFile(cgroupMax, os.Getenv("GOMEMLIMIT"))
}

func fromFile(path, env string) (int64, error) {
	if env != "" {
		return 0, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // not in a cgroup v2 container
	}
	if err != nil {
		return 0, fmt.Errorf("memory limit: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	limit, err := strconv.ParseInt(s, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("memory limit: %s holds %q", path, s)
	}
	soft := int64(float64(limit) * Ratio)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

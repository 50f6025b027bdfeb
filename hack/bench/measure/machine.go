// The machine and versions the figures were taken on.

package measure

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"flotilla.io/flotilla/test/testworld"
)

// Machine describes where the numbers were taken.
type Machine struct {
	CPUs      int     `json:"cpus"`
	CPUModel  string  `json:"cpuModel"`
	MemoryGiB float64 `json:"memoryGiB"`
	Kernel    string  `json:"kernel"`
}

// DescribeMachine reads the machine's CPUs, memory and kernel from /proc.
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemoryGiB = memInfoGiB(b, "MemTotal")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// MemAvailableGiB is the memory the machine has available for more
// processes now, or 0 when /proc does not say.
func MemAvailableGiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return memInfoGiB(b, "MemAvailable")
}

// memInfoGiB returns field of /proc/meminfo's contents in GiB, or 0 when it
// is missing.
func memInfoGiB(meminfo []byte, field string) float64 {
	for line := range strings.SplitSeq(string(meminfo), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				return kb / (1 << 20)
			}
		}
	}
	return 0
}

// LoadAverage returns /proc/loadavg's 1, 5 and 15 minute load averages.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Versions names what was measured: the test world's pinned versions (from
// their cache directories, e.g. kubernetes-v1.35.4), Go, and the flotilla
// commit (+dirty for uncommitted changes).
func Versions(ctx context.Context, bin testworld.Bin, root string) map[string]string {
	cacheDir := func(path string) string { return filepath.Base(filepath.Dir(filepath.Dir(path))) }
	v := map[string]string{
		"kubernetes": strings.TrimPrefix(cacheDir(bin.KubeAPIServer), "kubernetes-"),
		"etcd":       strings.TrimPrefix(cacheDir(bin.Etcd), "etcd-"),
		"kwok":       strings.TrimPrefix(cacheDir(bin.Kwok), "kwok-"),
		"go":         runtime.Version(),
		"flotilla":   "unknown",
	}
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	if head, err := git("rev-parse", "--short", "HEAD"); err == nil {
		v["flotilla"] = head
		if status, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && status != "" {
			v["flotilla"] += "+dirty"
		}
	}
	return v
}

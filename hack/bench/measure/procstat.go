// A process's CPU time and memory from /proc.

package measure

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat. Linux exposes
// clock ticks to user space as USER_HZ, which is 100 on every architecture
// the test world runs on.
const userHZ = 100

// ProcSample is what /proc says about one process at one moment.
type ProcSample struct {
	// CPUSeconds is user plus system time since the process started.
	CPUSeconds float64
	// RSSBytes is the resident set size now; HWMBytes its peak so far.
	RSSBytes, HWMBytes int64
	// FileBytes is the part of RSSBytes that maps files: for a static
	// binary, the pages of the binary itself (RssFile; 0 where the kernel
	// does not tell).
	FileBytes int64
}

// ReadProc samples process pid.
func ReadProc(pid int) (ProcSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	ticks, err := parseStatCPU(stat)
	if err != nil {
		return ProcSample{}, fmt.Errorf("stat of pid %d: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcSample{}, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	rss, hwm, file, err := parseStatusMemory(status)
	if err != nil {
		return ProcSample{}, fmt.Errorf("status of pid %d: %w", pid, err)
	}
	return ProcSample{CPUSeconds: float64(ticks) / userHZ, RSSBytes: rss, HWMBytes: hwm, FileBytes: file}, nil
}

// parseStatCPU returns utime+stime from the contents of /proc/<pid>/stat.
// The command name in parentheses may contain spaces, so the fields are
// counted from the last ')'.
func parseStatCPU(stat []byte) (uint64, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	// After ") " come field 3 (state) onwards; utime and stime are fields
	// 14 and 15.
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("only %d fields after the command name", len(fields))
	}
	utime, err := strconv.ParseUint(fields[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(fields[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return utime + stime, nil
}

// parseStatusMemory returns VmRSS, VmHWM and RssFile (0 if missing) in
// bytes from the contents of /proc/<pid>/status.
func parseStatusMemory(status []byte) (rss, hwm, file int64, err error) {
	found := 0
	for line := range strings.SplitSeq(string(status), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM" && name != "RssFile") {
			continue
		}
		f := strings.Fields(value)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, 0, fmt.Errorf("%s: unexpected value %q", name, value)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%s: %w", name, err)
		}
		switch name {
		case "VmRSS":
			rss = kb << 10
			found++
		case "VmHWM":
			hwm = kb << 10
			found++
		default:
			file = kb << 10
		}
	}
	if found != 2 {
		return 0, 0, 0, fmt.Errorf("VmRSS or VmHWM missing")
	}
	return rss, hwm, file, nil
}

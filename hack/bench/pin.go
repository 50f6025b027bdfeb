package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinPasses bounds how often pinProcess lists a process's threads again to
// catch threads created while it was pinning the others.
const pinPasses = 5

// pinProcess confines every thread of process pid to cpu, as
// `taskset -a -cp <cpu> <pid>` does. Affinity is per thread on Linux and a
// new thread inherits its creator's, so once every existing thread is
// pinned, threads created later stay on cpu too. It returns how many
// threads it pinned.
func pinProcess(pid, cpu int) (int, error) {
	var want unix.CPUSet
	want.Set(cpu)
	pinned := map[int]bool{}
	for range pinPasses {
		tids, err := threads(pid)
		if err != nil {
			return 0, err
		}
		changed := 0
		for _, tid := range tids {
			var got unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &got); err == nil && got == want {
				pinned[tid] = true
				continue
			}
			if err := unix.SchedSetaffinity(tid, &want); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // the thread exited meanwhile
				}
				return 0, fmt.Errorf("pin thread %d of pid %d to CPU %d: %w", tid, pid, cpu, err)
			}
			pinned[tid] = true
			changed++
		}
		if changed == 0 {
			return len(pinned), nil
		}
	}
	return 0, fmt.Errorf("pin pid %d to CPU %d: threads kept appearing after %d passes", pid, cpu, pinPasses)
}

// threads lists the thread ids of process pid.
func threads(pid int) ([]int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, fmt.Errorf("list threads of pid %d: %w", pid, err)
	}
	tids := make([]int, 0, len(entries))
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// pinnable reports whether this process may use both CPUs --pin uses.
func pinnable() bool {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		return false
	}
	return s.IsSet(hostCPU) && s.IsSet(memberCPU)
}

// Pinning the clusters and flotilla-node to CPUs (--pin).

package world

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"flotilla.io/flotilla/hack/bench/measure"
)

// CPUs the clusters are pinned to with --pin.
const (
	HostCPU   = 0
	MemberCPU = 1
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

// Pinnable reports whether this process may use both CPUs --pin uses.
func Pinnable() bool {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		return false
	}
	return s.IsSet(HostCPU) && s.IsSet(MemberCPU)
}

// pin puts the host's processes and flotilla-node on HostCPU and every
// member's on MemberCPU. In native and direct mode the measured cluster so
// runs all its processes on one CPU; in flotilla mode the host side and the
// member side each get a CPU of their own, as separate machines would.
func (t *Target) pin() error {
	type pinning struct {
		name string
		pid  int
		cpu  int
	}
	var ps []pinning
	for comp, p := range measure.ClusterProcesses(t.World.Host()) {
		ps = append(ps, pinning{t.World.Host().Name + "/" + comp, p.Pid(), HostCPU})
	}
	for _, m := range t.World.Members() {
		for comp, p := range measure.ClusterProcesses(m) {
			ps = append(ps, pinning{m.Name + "/" + comp, p.Pid(), MemberCPU})
		}
		if t.Fleet != nil {
			ps = append(ps, pinning{"flotilla-node/" + m.Name, t.Fleet.Node(m.Name).Pid(), HostCPU})
		}
	}
	for _, p := range ps {
		n, err := pinProcess(p.pid, p.cpu)
		if err != nil {
			return fmt.Errorf("pin %s: %w", p.name, err)
		}
		t.Logf("pinned %s (pid %d, %d threads) to CPU %d", p.name, p.pid, n, p.cpu)
	}
	return nil
}

// Tests of pinning a process to a CPU.

package world

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPinProcess(t *testing.T) {
	if !Pinnable() {
		t.Skip("needs CPUs 0 and 1")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("cannot start sleep:", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	n, err := pinProcess(cmd.Process.Pid, MemberCPU)
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Errorf("pinned %d threads, want at least 1", n)
	}
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(cmd.Process.Pid, &got); err != nil {
		t.Fatal(err)
	}
	if got.Count() != 1 || !got.IsSet(MemberCPU) {
		t.Errorf("affinity has %d CPUs, CPU %d set: %v; want only CPU %d", got.Count(), MemberCPU, got.IsSet(MemberCPU), MemberCPU)
	}
}

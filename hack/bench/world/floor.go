// The floor program, flotilla-node's idle memory is read against.

package world

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"flotilla.io/flotilla/test/testworld"
)

// FloorPackage is the bench's baseline for flotilla-node's idle memory: a
// program that only watches the pods of the host and of a member with
// client-go (see hack/bench/floor).
const FloorPackage = "./hack/bench/floor"

// Floor is a running floor program.
type Floor struct {
	cmd  *exec.Cmd
	done chan error
	logs strings.Builder
}

// StartFloor starts the floor program, built at bin, on clusters and
// returns once its informers have synced.
func StartFloor(ctx context.Context, bin string, clusters []*testworld.Cluster) (*Floor, error) {
	paths := make([]string, len(clusters))
	for i, c := range clusters {
		paths[i] = c.KubeconfigPath
	}
	f := &Floor{done: make(chan error, 1)}
	f.cmd = exec.Command(bin, "--kubeconfig="+strings.Join(paths, ","))
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	f.cmd.Stderr = &f.logs
	out, err := f.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the floor program: %w", err)
	}
	synced := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if sc.Text() == "synced" && !ok {
				ok = true
				synced <- true
			}
		}
		if !ok {
			synced <- false
		}
		_, _ = io.Copy(io.Discard, out)
		f.done <- f.cmd.Wait()
	}()
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	select {
	case ok := <-synced:
		if ok {
			return f, nil
		}
		err = errors.New("exited before its informers synced")
	case <-deadline.C:
		err = errors.New("its informers did not sync within 2 minutes")
	case <-ctx.Done():
		err = ctx.Err()
	}
	_ = f.Stop()
	return nil, fmt.Errorf("floor program: %w: %s", err, f.logs.String())
}

// PID is the floor program's process id.
func (f *Floor) PID() int { return f.cmd.Process.Pid }

// Stop interrupts the floor program and waits for it.
func (f *Floor) Stop() error {
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = f.cmd.Process.Kill()
		<-f.done
		return errors.New("floor program: killed after 10 s")
	}
}

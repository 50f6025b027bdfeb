package main

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

// floorPackage is the bench's baseline for flotilla-node's idle memory: a
// program that only watches the pods of the host and of a member with
// client-go (see ./floor/main.go).
const floorPackage = "./hack/bench/floor"

// floorProcess is a running floor program.
type floorProcess struct {
	cmd  *exec.Cmd
	done chan error
	logs strings.Builder
}

// startFloor starts the floor program, built at bin, on clusters and
// returns once its informers have synced.
func startFloor(ctx context.Context, bin string, clusters []*testworld.Cluster) (*floorProcess, error) {
	paths := make([]string, len(clusters))
	for i, c := range clusters {
		paths[i] = c.KubeconfigPath
	}
	f := &floorProcess{done: make(chan error, 1)}
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
	_ = f.stop()
	return nil, fmt.Errorf("floor program: %w: %s", err, f.logs.String())
}

func (f *floorProcess) pid() int { return f.cmd.Process.Pid }

// stop interrupts the floor program and waits for it.
func (f *floorProcess) stop() error {
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

// floorMemory adds the floor program's RSS to s, and flotilla-node's idle
// RSS (the largest) over it.
func floorMemory(f *floorProcess, s sample) error {
	ps, err := readProc(f.pid())
	if err != nil {
		return fmt.Errorf("sample the floor program: %w", err)
	}
	rss := float64(ps.RSSBytes) / (1 << 20)
	s["footprint.idle_floor_rss_mib"] = rss
	s["footprint.idle_floor_rss_file_mib"] = float64(ps.FileBytes) / (1 << 20)
	if node, ok := s["footprint.idle_node_rss_mib"]; ok && rss > 0 {
		s["footprint.idle_node_rss_over_floor"] = node / rss
	}
	return nil
}

package testworld

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
// etcd and kube-apiserver shut down in well under this; a process that takes
// longer is hung (etcd may ignore SIGTERM while it is already shutting down).
const stopGrace = 10 * time.Second

// logTailLines is how many lines of a process's log an error quotes.
const logTailLines = 30

// Process is one running program of a world, with its output in a log file.
type Process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error // set before done is closed
	// termAgain: the program drains on its first SIGTERM and stops on
	// the second (a Konnectivity agent), so Stop repeats it.
	termAgain bool
}

// startProcess starts path with args, appending its stdout and stderr to
// logPath. The process gets its own process group, so that Stop can signal
// anything it spawned, and SIGKILL when this program dies, so that nothing
// outlives a crashed or killed test.
func startProcess(name, logPath, path string, args ...string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", name, err)
	}
	// A header per start keeps the log of a restarted process readable.
	fmt.Fprintf(logFile, "=== %s starting %s %s\n", time.Now().Format(time.RFC3339Nano), path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Name returns the name the process was started under.
func (p *Process) Name() string { return p.name }

// Pid returns the process id, which is also its process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath returns the file that receives the process's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Args are the arguments the program was started with.
func (p *Process) Args() []string { return append([]string(nil), p.cmd.Args[1:]...) }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited and, if so, how (nil for
// exit status 0).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop ends the process: SIGTERM to its process group, SIGKILL after a grace
// period, then waits until it is reaped. It returns nil once the process is
// gone, whatever its exit status, and is safe to call again or concurrently.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pgid := p.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	grace := time.After(stopGrace)
	var again <-chan time.Time
	if p.termAgain {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		again = t.C
	}
wait:
	for {
		select {
		case <-p.done:
			return nil
		case <-again:
			// Signals of one kind do not queue: one sent before the
			// first was handled would be lost, so it is sent until the
			// process is gone.
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
		case <-grace:
			break wait
		}
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// Kill ends the process at once with SIGKILL to its process group, as a
// crash or the OOM killer would, and waits until it is reaped.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// exitError describes a process that exited when it should not have,
// quoting the end of its log.
func (p *Process) exitError() error {
	_, err := p.Exited()
	if err == nil {
		err = errors.New("exit status 0")
	}
	return fmt.Errorf("%s exited unexpectedly (%w); last lines of %s:\n%s", p.name, err, p.logPath, p.LogTail(logTailLines))
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string { return fileTail(p.logPath, n) }

// fileTail returns the last n lines of the file at path, reading at most the
// last 64 KiB of it.
func fileTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	const window = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return fmt.Sprintf("(cannot read log: %v)", err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

package main

import (
	"os/signal"
	"syscall"
	"unsafe"
)

// takeTerminal makes this process's own process group the terminal's
// foreground group, when the demo runs in the foreground of a terminal, and
// returns the function that gives the terminal back.
//
// A Ctrl-C is sent to the whole foreground group. Under `make demo` that
// group holds make (and flock, if the demo runs under the test-world lock),
// which would die of the SIGINT — make re-raises it once its child exits —
// however cleanly the demo itself stops. In a group of its own the demo
// alone gets the Ctrl-C and its exit status reaches the shell through make.
// The child re-executed in the network namespace inherits the group; the
// clusters' processes have groups of their own.
func takeTerminal() (restore func()) {
	const tty = 0 // stdin
	orig, err := tcgetpgrp(tty)
	if err != nil || orig != syscall.Getpgrp() {
		return func() {} // not a terminal, or not its foreground
	}
	if err := syscall.Setpgid(0, 0); err != nil {
		return func() {}
	}
	// Now a background group, the demo may not change the terminal's
	// foreground group unless SIGTTOU is ignored.
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	if err := tcsetpgrp(tty, syscall.Getpgrp()); err != nil {
		return func() {}
	}
	// The group make waits in no longer owns the terminal, so a Ctrl-Z
	// that stopped the demo would leave the shell waiting for make with
	// nothing to resume: the demo is stopped with Ctrl-C, not suspended.
	signal.Ignore(syscall.SIGTSTP)
	return func() {
		signal.Ignore(syscall.SIGTTOU)
		_ = tcsetpgrp(tty, orig)
	}
}

func tcgetpgrp(fd int) (int, error) {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, errno
	}
	return int(pgrp), nil
}

func tcsetpgrp(fd, pgrp int) error {
	p := int32(pgrp)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p))); errno != 0 {
		return errno
	}
	return nil
}

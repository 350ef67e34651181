package governor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Trial is what the governor preempts. The runtime driver implements it;
// ProcessTarget is the implementation for a runtime started as a process
// group.
type Trial interface {
	ID() string
	// Stop ends the trial's runtime: gracefully, then by force after grace.
	// It returns once the runtime is gone or ctx ends.
	Stop(ctx context.Context, grace time.Duration) error
}

// ProcessTarget stops a runtime process and its process group: SIGTERM (with
// SIGCONT, so a stopped process can act on it), then SIGKILL after the grace.
// Start the runtime with SysProcAttr{Setpgid: true} so the group is its own.
type ProcessTarget struct {
	TrialID string
	Pid     int
	// Done, when set, is closed by whoever Waits on the process; without it
	// exit is detected from /proc (a zombie counts as gone).
	Done <-chan struct{}
}

// ID implements Trial.
func (p ProcessTarget) ID() string { return p.TrialID }

// ErrStopTimeout is returned when a process outlived SIGKILL's wait.
var ErrStopTimeout = errors.New("process did not exit after SIGKILL")

// Stop implements Trial.
func (p ProcessTarget) Stop(ctx context.Context, grace time.Duration) error {
	if p.Pid <= 0 {
		return fmt.Errorf("stop trial %s: no pid", p.TrialID)
	}
	pg, err := syscall.Getpgid(p.Pid)
	group := err == nil && pg == p.Pid
	if p.gone(group) {
		return nil
	}
	p.signal(group, syscall.SIGTERM)
	p.signal(group, syscall.SIGCONT)
	if p.wait(ctx, group, grace) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.signal(group, syscall.SIGKILL)
	if p.wait(ctx, group, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("stop trial %s pid %d: %w", p.TrialID, p.Pid, ErrStopTimeout)
}

// signal sends to the group when the pid leads one, else to the process.
func (p ProcessTarget) signal(group bool, sig syscall.Signal) {
	if group {
		_ = syscall.Kill(-p.Pid, sig)
		return
	}
	_ = syscall.Kill(p.Pid, sig)
}

func (p ProcessTarget) wait(ctx context.Context, group bool, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.gone(group) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

// gone reports whether the process, and its group when it leads one, no
// longer runs. Zombies count as gone: a container's init may never reap
// orphans, and a zombie holds no memory or card.
func (p ProcessTarget) gone(group bool) bool {
	if p.Done != nil {
		select {
		case <-p.Done:
		default:
			return false
		}
	} else if st, ok := procState(p.Pid); ok && st != 'Z' && st != 'X' {
		return false
	}
	return !group || !groupLive(p.Pid)
}

// procState returns the state letter of pid from /proc/<pid>/stat.
func procState(pid int) (byte, bool) {
	st, _, ok := procStat(pid)
	return st, ok
}

// procStat returns state and process group of pid.
func procStat(pid int) (byte, int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// After the parenthesised command name: state, ppid, pgrp.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pg, true
}

// groupLive reports whether any non-zombie process is in group pgid.
func groupLive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, pg, ok := procStat(pid); ok && pg == pgid && st != 'Z' && st != 'X' {
			return true
		}
	}
	return false
}

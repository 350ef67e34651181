package governor

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	if p.gone() {
		return nil
	}
	p.signal(syscall.SIGTERM)
	p.signal(syscall.SIGCONT)
	if p.wait(ctx, grace) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.signal(syscall.SIGKILL)
	if p.wait(ctx, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("stop trial %s pid %d: %w", p.TrialID, p.Pid, ErrStopTimeout)
}

// signal sends to the group when the pid leads one, else to the process.
func (p ProcessTarget) signal(sig syscall.Signal) {
	if pg, err := syscall.Getpgid(p.Pid); err == nil && pg == p.Pid {
		_ = syscall.Kill(-p.Pid, sig)
		return
	}
	_ = syscall.Kill(p.Pid, sig)
}

func (p ProcessTarget) wait(ctx context.Context, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.Done != nil {
			select {
			case <-p.Done:
				return true
			default:
			}
		} else if p.gone() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		case <-p.Done: // nil channel blocks forever: fine
			return true
		}
	}
}

// gone reports whether the process no longer runs: absent, or a zombie.
func (p ProcessTarget) gone() bool {
	if p.Done != nil {
		select {
		case <-p.Done:
			return true
		default:
			return false
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
	if err != nil {
		return true
	}
	// Field 3, after the parenthesised command name, is the state.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

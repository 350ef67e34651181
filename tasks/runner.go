package tasks

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Command is one test run: argv in a directory with a time cap.
type Command struct {
	Dir   string
	Argv  []string
	Env   []string // added to the runner's environment
	Limit time.Duration
}

// RunResult is what a Runner reports. A non-zero exit is a result, not an
// error; error is for failing to run at all.
type RunResult struct {
	ExitCode int           `json:"exit_code"`
	TimedOut bool          `json:"timed_out"`
	Output   string        `json:"output"` // combined stdout+stderr, tail only
	Wall     time.Duration `json:"wall_ns"`
	// LimitHit names the containment limit that ended the command
	// ("processes", "memory", "cpu_time", "file_size", "scratch_bytes"), if any.
	LimitHit string `json:"limit_hit,omitempty"`
}

// Runner runs a test command. The lead injects one that runs inside the
// network sandbox; ExecRunner is the plain host default.
type Runner interface {
	Run(ctx context.Context, c Command) (RunResult, error)
}

// ExecRunner runs the command with os/exec in its own session (and process group) and
// kills the whole group when the time cap passes, so a test that forks
// cannot outlive its grade.
type ExecRunner struct {
	// Env, when non-nil, replaces the inherited environment.
	Env []string
}

const outputTail = 8 << 10

func (r ExecRunner) Run(ctx context.Context, c Command) (RunResult, error) {
	if len(c.Argv) == 0 {
		return RunResult{}, errors.New("empty test command")
	}
	if c.Limit <= 0 {
		c.Limit = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, c.Limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Dir = c.Dir
	env := r.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append([]string{}, env...), c.Env...)
	// A session of its own (and so a process group, which Cancel kills):
	// a test command must not reach the terminal of whoever ran rig.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 2 * time.Second
	// Only the tail is kept: a test that prints without end must not grow
	// rig's memory with it.
	out := &tailWriter{max: outputTail}
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	err := cmd.Run()
	res := RunResult{Wall: time.Since(start), Output: tail(out.Bytes(), outputTail)}
	switch ctx.Err() {
	case context.DeadlineExceeded:
		res.TimedOut, res.ExitCode = true, -1
		return res, nil
	case context.Canceled:
		// The caller gave up; that is not a test result.
		return res, ctx.Err()
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	default:
		return res, err
	}
	return res, nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= w.max {
		w.buf = append(w.buf[:0], p[len(p)-w.max:]...)
		return n, nil
	}
	if over := len(w.buf) + len(p) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	w.buf = append(w.buf, p...)
	return n, nil
}

func (w *tailWriter) Bytes() []byte { return w.buf }

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

package run

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"rig/runtimes"
	"rig/tasks"
	"strings"
	"time"
)

// sandboxRunner runs a task's test command inside a loopback-only sandbox,
// so code written by a model cannot reach the network while it is tested.
type sandboxRunner struct {
	noSandbox bool
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func (r sandboxRunner) Run(ctx context.Context, c tasks.Command) (tasks.RunResult, error) {
	start := time.Now()
	home, err := os.MkdirTemp("", "rig-test-home-")
	if err != nil {
		return tasks.RunResult{}, err
	}
	defer os.RemoveAll(home)
	env, err := runtimes.BuildEnv(home, envMap(c.Env))
	if err != nil {
		return tasks.RunResult{}, err
	}
	logPath := filepath.Join(home, "test.log")
	limit := c.Limit
	if limit <= 0 {
		limit = time.Minute
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// The private home is writable too (HOME and TMPDIR point there); the
	// log beside it is written by the sandbox's init, outside.
	sb, err := runtimes.StartSandbox(rctx, runtimes.SandboxSpec{Argv: c.Argv, Env: env, Dir: c.Dir, NoSandbox: r.noSandbox,
		Writable: []string{filepath.Join(home, "tmp")}, Limits: runtimes.CommandLimits()}, logPath)
	if err != nil {
		return tasks.RunResult{}, err
	}
	res := tasks.RunResult{}
	select {
	case <-sb.Done():
	case <-rctx.Done():
		sb.Kill()
		res.TimedOut = true
	}
	res.Wall = time.Since(start)
	if err := sb.ExitError(); err != nil {
		var ee interface{ ExitCode() int }
		if errors.As(err, &ee) {
			res.ExitCode = ee.ExitCode()
		} else {
			res.ExitCode = -1
		}
	}
	if res.TimedOut && res.ExitCode == 0 {
		res.ExitCode = -1
	}
	res.LimitHit = sb.LimitHit()
	res.Output = sb.LogTail(40)
	return res, nil
}

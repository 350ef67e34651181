// Package sandboxed is the task graders with every test command run inside
// rig's loopback-only sandbox (runtimes.StartSandbox), so code a model wrote
// cannot reach the network, or anything outside its repository, while it is
// tested. It is the one place tasks (the graders) and runtimes (the
// sandbox) meet, for the runner, the daemon's regrade and the CLI's lint and
// audit alike. It is not for running models.
package sandboxed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rig/runtimes"
	"rig/tasks"
)

// Graders is the task graders' registry, with test commands run inside the
// loopback-only sandbox unless noSandbox.
func Graders(noSandbox bool) *tasks.Registry {
	return tasks.DefaultRegistry(Runner{NoSandbox: noSandbox})
}

// Runner runs a task's test command inside a loopback-only sandbox, so
// code written by a model cannot reach the network while it is tested.
type Runner struct {
	// NoSandbox runs the command without namespaces (rig --no-sandbox).
	NoSandbox bool
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

// Run runs c in a fresh sandbox with a private home, and kills it at its
// time limit.
func (r Runner) Run(ctx context.Context, c tasks.Command) (tasks.RunResult, error) {
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
	sb, err := runtimes.StartSandbox(rctx, runtimes.SandboxSpec{Argv: c.Argv, Env: env, Dir: c.Dir, NoSandbox: r.NoSandbox,
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

package runtimes

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// RunTool runs one of a runtime build's own programs (llama-fit-params,
// llama-batched-bench, …) once on a model, contained like any runtime (the
// model file is a download rig does not trust, and the program reads it),
// and returns its output, stdout and stderr together, once done reports
// enough (nil: never) or the program ends. gpu gives it the host's card.
func RunTool(ctx context.Context, argv []string, model string, noSandbox, gpu bool, done func(log string) bool) (string, error) {
	work, err := os.MkdirTemp("", "rig-tool-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	env, err := BuildEnv(work, nil)
	if err != nil {
		return "", err
	}
	logPath := filepath.Join(work, "tool.log")
	sb, err := StartSandbox(ctx, SandboxSpec{
		Argv: argv, Env: env, Dir: work, ReadOnly: []string{model}, Limits: RuntimeLimits(), NoSandbox: noSandbox, GPU: gpu,
	}, logPath)
	if err != nil {
		return "", err
	}
	defer sb.Kill()
	for {
		select {
		case <-sb.Done():
			b, _ := ReadLog(logPath)
			return string(b), sb.ExitError()
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
			if done == nil {
				continue
			}
			if b, _ := ReadLog(logPath); done(string(b)) {
				return string(b), nil
			}
		}
	}
}

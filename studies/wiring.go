package studies

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"rig/internal/provision"
	"rig/preflight"
	"rig/runtimes"
	"rig/tasks"
)

// localAssets resolves pins to digests on this machine: model files hashed,
// runtime binaries from the provisioned cache, task banks parsed, validated
// against their graders and checked against their audit.
type localAssets struct {
	installed provision.Installed
	graders   *tasks.Registry
	// auditDir holds the banks' audit records; a bank edited after its
	// audit is refused at freeze.
	auditDir func(bank string) string
}

func (a localAssets) FileSHA256(_ context.Context, path string) (string, error) {
	return runtimes.FileSHA256(path)
}

func (a localAssets) Binary(_ context.Context, component string) (Binary, error) {
	var path string
	switch component {
	case "llama-server":
		path = a.installed.LlamaServer
	case "ollama":
		path = a.installed.Ollama
	case "aider":
		path = a.installed.Aider
	default:
		return Binary{}, fmt.Errorf("unknown runtime component %q", component)
	}
	if path == "" {
		return Binary{}, fmt.Errorf("%s: %w", component, provision.ErrNotProvisioned)
	}
	sum, err := runtimes.FileSHA256(path)
	if err != nil {
		return Binary{}, fmt.Errorf("%s at %s: %w (run make setup)", component, path, err)
	}
	return Binary{Component: component, Path: path, SHA256: sum}, nil
}

func (a localAssets) Bank(_ context.Context, jk JobKind) (Bank, error) {
	b, err := tasks.LoadBank(jk.TaskBank)
	if err != nil {
		return Bank{}, err
	}
	if err := a.graders.Validate(b); err != nil {
		return Bank{}, err
	}
	if a.auditDir != nil {
		if _, err := tasks.CheckAudited(b, a.auditDir(jk.TaskBank)); err != nil {
			return Bank{}, fmt.Errorf("job kind %s: %w (run: rig tasks audit %s)", jk.Name, err, jk.TaskBank)
		}
	}
	return Bank{Path: jk.TaskBank, SHA256: b.Hash, Tasks: sampleByTemplate(b.Select(jk.IncludeHoldout), jk.SampleTasks)}, nil
}

// BankAuditDir is where `rig tasks audit BANK` keeps a bank's audit records:
// "audits" beside the bank file.
func BankAuditDir(bank string) string { return filepath.Join(filepath.Dir(bank), "audits") }

// GGUFQuant reads a model file's quant from its GGUF header.
func GGUFQuant(path string) (string, error) {
	f, err := preflight.Open(path)
	if err != nil {
		return "", err
	}
	ft, ok := f.Uint("general.file_type")
	if !ok {
		return "", fmt.Errorf("%s: no general.file_type in the GGUF header", path)
	}
	return preflight.FileTypeName(ft), nil
}

// sandboxRunner runs a task's test command inside a loopback-only sandbox,
// so code written by a model cannot reach the network while it is tested.
type sandboxRunner struct {
	noSandbox bool
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
	sb, err := runtimes.StartSandbox(rctx, runtimes.SandboxSpec{Argv: c.Argv, Env: env, Dir: c.Dir, NoSandbox: r.noSandbox}, logPath)
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
	res.Output = sb.LogTail(40)
	return res, nil
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

// sampleByTemplate takes n tasks in turn from each template, so a sample
// covers every template before it takes any twice; n <= 0 keeps all.
func sampleByTemplate(ts []tasks.Task, n int) []string {
	var ids []string
	if n <= 0 || n >= len(ts) {
		for _, t := range ts {
			ids = append(ids, t.ID)
		}
		return ids
	}
	byTemplate := map[string][]string{}
	var templates []string
	for _, t := range ts {
		if _, ok := byTemplate[t.TemplateID]; !ok {
			templates = append(templates, t.TemplateID)
		}
		byTemplate[t.TemplateID] = append(byTemplate[t.TemplateID], t.ID)
	}
	sort.Strings(templates)
	for _, tpl := range templates {
		sort.Strings(byTemplate[tpl])
	}
	for round := 0; len(ids) < n; round++ {
		for _, tpl := range templates {
			if round < len(byTemplate[tpl]) && len(ids) < n {
				ids = append(ids, byTemplate[tpl][round])
			}
		}
	}
	return ids
}

package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"rig/internal/provision"
	"rig/runtimes"
	"rig/studies"
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
	// open opens models, banks and audit records (Env.Open); nil is os.Open.
	open func(string) (*os.File, error)
}

func (a localAssets) opener() func(string) (*os.File, error) {
	if a.open != nil {
		return a.open
	}
	return os.Open
}

func (a localAssets) FileSHA256(_ context.Context, path string) (string, error) {
	f, err := a.opener()(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (a localAssets) Binary(_ context.Context, component string) (studies.Binary, error) {
	b, err := runtimes.BuildOf(a.installed, component)
	if err != nil {
		return studies.Binary{}, err
	}
	return studies.Binary{Component: component, Path: b.Binary, SHA256: b.BinarySHA256}, nil
}

func (a localAssets) Bank(_ context.Context, jk studies.JobKind) (studies.Bank, error) {
	b, err := tasks.LoadBankWith(a.opener(), jk.TaskBank)
	if err != nil {
		return studies.Bank{}, err
	}
	if err := a.graders.Validate(b); err != nil {
		return studies.Bank{}, err
	}
	// Checked here as well as at the audit: a record written before the
	// audit refused duplicates must not let one through.
	exact, near := tasks.Duplicates(b)
	if len(exact) > 0 {
		return studies.Bank{}, fmt.Errorf("job kind %s: %w", jk.Name, tasks.CheckDuplicates(b))
	}
	if a.auditDir != nil {
		if _, err := tasks.CheckAuditedWith(a.opener(), b, a.auditDir(jk.TaskBank)); err != nil {
			return studies.Bank{}, fmt.Errorf("job kind %s: %w (run: rig tasks audit %s)", jk.Name, err, jk.TaskBank)
		}
	}
	return studies.Bank{Path: jk.TaskBank, SHA256: b.Hash, Tasks: studies.SampleByTemplate(b.Select(jk.IncludeHoldout), jk.SampleTasks),
		NearDuplicates: near, Completion: b.Header.Completion != nil, Graders: studies.TaskGraders(b.Tasks)}, nil
}

// Assets resolves a design's pins on this host: what Register and Freeze
// fingerprint, and what a runner on another machine checks before it runs.
func (env Env) Assets() studies.Assets {
	return localAssets{installed: env.Installed, graders: env.Graders(), auditDir: studies.BankAuditDir, open: env.Open}
}

package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"rig/internal/cgroup"
	"rig/internal/layout"
	"rig/scaleout"
	"syscall"
	"time"
)

// Options are the resident daemon's settings, as `rig daemon` parsed them.
type Options struct {
	Home      string // RIG_HOME: studies live under Home/studies
	Socket    string // the unix socket the command line calls
	NoSandbox bool   // run runtimes without network namespaces (recorded on every receipt)
	// Policy is the policy file giving users and groups their roles; empty
	// means single-user mode (see PolicyPath for the default).
	Policy string
	Log    *slog.Logger
	// Engine, when set, names the Temporal cluster and spool through which
	// `rig study run --engine temporal` spreads trials over rig workers.
	Engine *scaleout.Config
	// Metrics is where /metrics is served (HOST:PORT); empty or "off"
	// serves none. MetricsDefault says it is the flag's default, whose
	// port, when another process of the daemon's own account holds it,
	// gives way to a free loopback one; held by another account it is an
	// error naming the holder (metrics.Listen).
	Metrics        string
	MetricsDefault bool
}

// PolicyPath is the default policy file: $RIG_POLICY, else
// /etc/rig/policy.json when it exists, else none (single-user mode).
func PolicyPath() string {
	if p := os.Getenv("RIG_POLICY"); p != "" {
		return p
	}
	if _, err := os.Stat("/etc/rig/policy.json"); err == nil {
		return "/etc/rig/policy.json"
	}
	return ""
}

// loadPolicy is the policy at path, or the single-user one when path is empty.
func loadPolicy(path string) (*Policy, error) {
	if path == "" {
		return SingleUser(os.Geteuid()), nil
	}
	return LoadPolicy(path)
}

// policyAudit appends one line to Home/audits/policy.jsonl: which policy came
// into force, when, and what it replaced.
func policyAudit(home string, p *Policy, replaced *Policy, why string) error {
	rec := map[string]any{"at": time.Now().UTC(), "why": why, "policy": p.Describe(), "file": p.File(), "sha256": p.Digest()}
	if replaced != nil {
		rec["replaced_sha256"] = replaced.Digest()
		rec["replaced"] = replaced.Describe()
	}
	return appendAuditLine(home, "policy", rec)
}

// appendAuditLine appends rec as one JSON line to Home/audits/NAME.jsonl:
// the daemon-wide trails (policy, proposals, the monthly budget) that
// belong to no one study's store. A line is written whole by one write on
// a file opened for appending, so concurrent writers never interleave.
func appendAuditLine(home, name string, rec any) error {
	dir := layout.Home(home).Audits()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(layout.Home(home).Audit(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("audits/%s.jsonl: %w", name, err)
	}
	return f.Close()
}

// reloadOnHangup re-reads the policy file on SIGHUP. A file that no longer
// loads (or is no longer trusted) leaves the policy in force unchanged.
func reloadOnHangup(ctx context.Context, svc *Service, path string, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				p, err := loadPolicy(path)
				if err != nil {
					log.Error("policy reload refused; the policy in force stays", "err", err)
					continue
				}
				old := svc.Access().Policy()
				svc.Access().SetPolicy(p)
				if err := policyAudit(svc.Home, p, old, "reloaded on SIGHUP"); err != nil {
					log.Error("recording the policy reload", "err", err)
				}
				log.Info("policy reloaded", "policy", p.Describe())
			}
		}
	}()
}

// Run is the resident daemon: it takes the machine-wide lock, starts the
// governor, removes card reservations a killed daemon left, resumes every
// execution that was running, and serves the command line until ctx ends.
func Run(ctx context.Context, opts Options) error {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	// A policy that cannot be trusted stops the daemon before it touches
	// anything: serving without it would hand every role to whoever connects.
	policy, err := loadPolicy(opts.Policy)
	if err != nil {
		return err
	}
	// Taken before anything resumes or touches the card: a second daemon
	// must change nothing.
	release, err := Lock(LockPath(), opts.Home, opts.Socket)
	if err != nil {
		return err
	}
	defer release()
	svc, err := NewService(opts.Home, log)
	if err != nil {
		return err
	}
	defer svc.Close()
	svc.NoSandbox = opts.NoSandbox
	svc.Access().SetPolicy(policy)
	if err := policyAudit(opts.Home, policy, nil, "daemon start"); err != nil {
		return err
	}
	log.Info("access", "policy", policy.Describe())
	reloadOnHangup(ctx, svc, opts.Policy, log)
	if err := svc.startMetrics(ctx, opts, log); err != nil { // metrics (metrics.go)
		return err
	}
	gov, err := StartGovernor(ctx, svc, log)
	if err != nil {
		return err
	}
	svc.Gates = gov
	if opts.Engine != nil {
		if err := svc.Executions().StartEngine(ctx, *opts.Engine); err != nil {
			return err
		}
		defer svc.Engine.Close()
	}
	// A daemon killed while a runtime ran in a simulated card left that
	// card's cgroup behind; remove it before anything resumes.
	if removed, err := cgroup.CleanupStale(ctx); err != nil && !errors.Is(err, cgroup.ErrNoCgroup) {
		log.Warn("removing stale card reservations", "err", err)
	} else if len(removed) > 0 {
		log.Info("removed stale card reservations", "cgroups", removed)
	}
	if resumed, err := svc.Executions().Resume(ctx); err != nil {
		log.Error("resuming executions", "err", err)
	} else {
		for _, r := range resumed {
			log.Info("resumed", "execution", r.ID, "done", r.Done)
		}
	}
	log.Info("rig daemon serving", "socket", opts.Socket, "home", opts.Home)
	return svc.Serve(ctx, opts.Socket)
}

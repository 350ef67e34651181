package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"rig/preflight"
	"rig/studies"
)

func homeDir(cmd *cobra.Command) string {
	if h, _ := cmd.Flags().GetString("home"); h != "" {
		return h
	}
	return studies.DefaultHome()
}

func socketPath(cmd *cobra.Command) string {
	if s, _ := cmd.Flags().GetString("socket"); s != "" {
		return s
	}
	return filepath.Join(homeDir(cmd), "rig.sock")
}

func newDaemonCommand() *cobra.Command {
	var noSandbox bool
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the resident process that owns the card and runs studies",
		Long: `daemon is rig's resident process: one per machine, whatever its RIG_HOME. It
takes a machine-wide lock at start (an flock on /run/lock/rig-daemon.lock, or
rig-daemon.lock in the temporary directory where /run/lock is absent); a second
daemon is refused, naming the lock file and the pid and RIG_HOME of the one that
holds it. RIG_DAEMON_LOCK names another lock file: only for tests that start a
private daemon per RIG_HOME, never beside a daemon that drives the real card.

It owns the card, runs the safety governor and its watchdog, serves the command
line over a unix socket (mode 0600, default $RIG_HOME/rig.sock), and runs one
execution at a time.
Executions survive the command line going away; if the daemon itself is killed,
starting it again resumes every execution that was running, with no receipt lost
or duplicated.

The governor's thresholds are the defaults unless $RIG_HOME/governor.json
overrides them (poll_ms, heartbeat_ms, grace_ms, read_timeout_ms and policies,
e.g. {"policies":{"hung-runtime":{"limit":30}}}); a file with an impossible
value stops the daemon at start, naming the file, the field and the fix.

  rig daemon &                 start it (or under systemd: deploy/systemd/rig-daemon.service)
  rig study status NAME        follow a study`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			// Taken before anything resumes or touches the card: a second
			// daemon must change nothing.
			release, err := lockDaemon(daemonLockPath(), homeDir(cmd), socketPath(cmd))
			if err != nil {
				return err
			}
			defer release()
			svc, err := studies.NewService(homeDir(cmd), log)
			if err != nil {
				return err
			}
			defer svc.Close()
			svc.NoSandbox = noSandbox
			gov, err := startGovernor(cmd.Context(), svc, log)
			if err != nil {
				return err
			}
			svc.Gates = gov
			// A daemon killed while a runtime ran in a simulated card left
			// that card's cgroup behind; remove it before anything resumes.
			if removed, err := preflight.CleanupStale(cmd.Context()); err != nil && !errors.Is(err, preflight.ErrNoCgroup) {
				log.Warn("removing stale card reservations", "err", err)
			} else if len(removed) > 0 {
				log.Info("removed stale card reservations", "cgroups", removed)
			}
			if resumed, err := svc.Resume(cmd.Context()); err != nil {
				log.Error("resuming executions", "err", err)
			} else {
				for _, r := range resumed {
					log.Info("resumed", "execution", r.ID, "done", r.Done)
				}
			}
			log.Info("rig daemon serving", "socket", socketPath(cmd), "home", homeDir(cmd))
			return serveDaemon(cmd.Context(), socketPath(cmd), daemonMethods(svc))
		},
	}
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run runtimes without network namespaces (recorded on every receipt)")
	cmd.AddCommand(newDaemonWaitCommand())
	return cmd
}

// decode reads a request body into v; an empty body leaves v zero.
func decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("bad request: %w", err)
	}
	return nil
}

type nameReq struct {
	Name   string `json:"name"`
	Actor  string `json:"actor,omitempty"`
	Why    string `json:"why,omitempty"`
	Format string `json:"format,omitempty"`
}

type dryRunReq struct {
	Name   string `json:"name"`
	Speeds string `json:"speeds,omitempty"`
}

type reportReq struct {
	Name string `json:"name"`
	studies.ReportOptions
}

type reviewReq struct {
	Name   string         `json:"name"`
	Review studies.Review `json:"review"`
	Why    string         `json:"why"`
}

// method adapts a typed daemon method to a handler: the request is decoded
// into Req first.
func method[Req any](fn func(ctx context.Context, req Req, text io.Writer) (any, error)) handler {
	return func(ctx context.Context, raw json.RawMessage, text io.Writer) (any, error) {
		var req Req
		if err := decode(raw, &req); err != nil {
			return nil, err
		}
		return fn(ctx, req, text)
	}
}

func daemonMethods(svc *studies.Service) map[string]handler {
	return map[string]handler{
		"register": method(func(ctx context.Context, r studies.RegisterRequest, _ io.Writer) (any, error) {
			return svc.Register(ctx, r)
		}),
		"review": method(func(ctx context.Context, r reviewReq, _ io.Writer) (any, error) {
			return svc.Review(ctx, r.Name, r.Review, r.Why)
		}),
		"approve": method(func(ctx context.Context, r nameReq, _ io.Writer) (any, error) {
			return svc.Approve(ctx, r.Name, r.Actor, r.Why)
		}),
		"freeze": method(func(ctx context.Context, r nameReq, _ io.Writer) (any, error) {
			return svc.Freeze(ctx, r.Name, r.Actor)
		}),
		"preflight": method(func(ctx context.Context, r nameReq, w io.Writer) (any, error) { return svc.Preflight(ctx, r.Name, w) }),
		"validate":  method(func(ctx context.Context, r nameReq, w io.Writer) (any, error) { return svc.Validate(ctx, r.Name, w) }),
		"dry-run": method(func(ctx context.Context, r dryRunReq, w io.Writer) (any, error) {
			return svc.DryRun(ctx, r.Name, r.Speeds, w)
		}),
		"run":    method(func(ctx context.Context, r studies.RunRequest, _ io.Writer) (any, error) { return svc.Run(ctx, r) }),
		"cancel": method(func(ctx context.Context, r nameReq, _ io.Writer) (any, error) { return svc.Cancel(ctx, r.Name) }),
		"status": method(func(ctx context.Context, r nameReq, _ io.Writer) (any, error) { return svc.Status(ctx, r.Name) }),
		"grade":  gradeMethod(svc),
		"report": method(func(ctx context.Context, r reportReq, _ io.Writer) (any, error) {
			return svc.Report(ctx, r.Name, r.ReportOptions)
		}),
		"decide": method(func(ctx context.Context, r studies.DecideRequest, _ io.Writer) (any, error) {
			return svc.Decide(ctx, r)
		}),
		"check": method(func(ctx context.Context, r nameReq, _ io.Writer) (any, error) { return svc.CheckStore(ctx, r.Name) }),
		"export": method(func(ctx context.Context, r nameReq, w io.Writer) (any, error) {
			return nil, svc.Export(ctx, r.Name, orDefaultStr(r.Format, "jsonl"), w)
		}),
		"list": method(func(ctx context.Context, _ struct{}, _ io.Writer) (any, error) { return svc.List() }),
	}
}

func orDefaultStr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

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
		Long: `daemon is rig's resident process: one per machine. It owns the card, runs the
safety governor and its watchdog, serves the command line over a unix socket
(mode 0600, default $RIG_HOME/rig.sock), and runs one execution at a time.
Executions survive the command line going away; if the daemon itself is killed,
starting it again resumes every execution that was running, with no receipt lost
or duplicated.

  rig daemon &                 start it (or under systemd: deploy/systemd/rig-daemon.service)
  rig study status NAME        follow a study`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
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
	return cmd
}

// decode reads a request body into v with unknown fields refused.
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

type execReq struct {
	Name      string `json:"name"`
	Execution string `json:"execution,omitempty"`
}

type reviewReq struct {
	Name   string         `json:"name"`
	Review studies.Review `json:"review"`
	Why    string         `json:"why"`
}

func daemonMethods(svc *studies.Service) map[string]handler {
	return map[string]handler{
		"register": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			var r studies.RegisterRequest
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Register(ctx, r)
		},
		"review": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			var r reviewReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Review(ctx, r.Name, r.Review, r.Why)
		},
		"approve": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			var r nameReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Approve(ctx, r.Name, r.Actor, r.Why)
		},
		"freeze": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			var r nameReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Freeze(ctx, r.Name, r.Actor)
		},
		"preflight": func(ctx context.Context, raw json.RawMessage, w io.Writer) (any, error) {
			var r nameReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Preflight(ctx, r.Name, w)
		},
		"validate": func(ctx context.Context, raw json.RawMessage, w io.Writer) (any, error) {
			var r nameReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Validate(ctx, r.Name, w)
		},
		"run": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			var r studies.RunRequest
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Run(ctx, r)
		},
		"cancel": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			var r nameReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Cancel(ctx, r.Name)
		},
		"status": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			var r nameReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Status(ctx, r.Name)
		},
		"report": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			var r execReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Report(ctx, r.Name, r.Execution)
		},
		"decide": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			var r studies.DecideRequest
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.Decide(ctx, r)
		},
		"check": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			var r nameReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.CheckStore(ctx, r.Name)
		},
		"export": func(ctx context.Context, raw json.RawMessage, w io.Writer) (any, error) {
			var r nameReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return nil, svc.Export(ctx, r.Name, orDefaultStr(r.Format, "jsonl"), w)
		},
		"dry-run": func(ctx context.Context, raw json.RawMessage, w io.Writer) (any, error) {
			var r dryRunReq
			if err := decode(raw, &r); err != nil {
				return nil, err
			}
			return svc.DryRun(ctx, r.Name, r.Speeds, w)
		},
		"list": func(ctx context.Context, raw json.RawMessage, _ io.Writer) (any, error) {
			return svc.List()
		},
	}
}

func orDefaultStr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

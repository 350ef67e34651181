package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"rig/daemon"
	"rig/governor"
	"rig/governor/gates"
	"rig/internal/provision"
	"rig/scaleout"
)

// engineFlags adds the flags naming the Temporal cluster and the spool, the
// same for the daemon (the coordinator) and a worker.
func engineFlags(cmd *cobra.Command) *scaleout.Config {
	c := &scaleout.Config{}
	f := cmd.Flags()
	f.StringVar(&c.Address, "temporal", os.Getenv("RIG_TEMPORAL"), "the Temporal frontend, HOST:PORT ($RIG_TEMPORAL); single host: rig engine dev")
	f.StringVar(&c.Namespace, "namespace", "default", "the Temporal namespace")
	f.StringVar(&c.Spool, "spool", os.Getenv("RIG_SPOOL"), "the folder the coordinator and every worker share ($RIG_SPOOL): receipts and generation records come back through it")
	f.StringVar(&c.APIKeyFile, "temporal-api-key-file", "", "a file holding the cluster's API key (implies TLS)")
	f.BoolVar(&c.TLS, "temporal-tls", false, "connect with TLS")
	f.StringVar(&c.CAFile, "temporal-ca", "", "a PEM CA for the cluster's certificate")
	f.StringVar(&c.CertFile, "temporal-cert", "", "a client certificate (mTLS)")
	f.StringVar(&c.KeyFile, "temporal-key", "", "the client certificate's key")
	f.StringVar(&c.ServerName, "temporal-server-name", "", "the name the cluster's certificate must carry")
	return c
}

func newWorkerCommand() *cobra.Command {
	var id, installedEnv, study, execution string
	var queues []string
	var noSandbox, faults bool
	var cfg *scaleout.Config
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run trials of frozen studies handed out by Temporal (one process per card)",
		Long: `worker is the process a GPU machine runs to take part in scale-out studies.
It connects out to the Temporal cluster (no port is opened here), serves the
task queues its runtime builds and card name (rig.trials.RUNTIME.BUILD.CARD),
and runs each trial it is handed with the same runner, loopback-only sandbox
and governor a local run uses, one runtime at a time. A trial's receipt and
generation record go to the shared spool; the coordinator (the daemon that
owns the study) merges them exactly once.

It refuses, without running anything:
  - a trial whose runtime build differs from this machine's (and then stops
    serving that queue);
  - a trial of a study whose snapshot the spool does not hold;
  - every trial while its governor is not ready (fault suite not passed,
    heartbeat stale, a policy held): it stops polling until it is.

Launch one per card with what the site already runs: deploy/systemd,
deploy/slurm (sbatch --array) or deploy/kubernetes. See docs/scale-out.md.

  rig engine dev --db /var/lib/rig/temporal.db &      a single host's server
  rig worker --temporal 127.0.0.1:7233 --spool /srv/rig-spool
  rig worker --temporal temporal.studio:7233 --temporal-tls --spool /mnt/rig --id gpu07`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			in, err := provision.LoadFile(installedEnv)
			if err != nil {
				return err
			}
			if id == "" {
				h, _ := os.Hostname()
				id = fmt.Sprintf("%s-%d", h, os.Getpid())
			}
			home := homeDir(cmd)
			g, err := gates.Start(ctx, gates.Options{Home: home, Sink: governor.SlogSink{Logger: log}, Log: log,
				// Each worker's own heartbeat: several on one machine never vouch for each other.
				Heartbeat: filepath.Join(governor.DefaultStateDir(), "heartbeat-worker-"+id)})
			if err != nil {
				return err
			}
			if faults {
				// Fault injection for the scale-out suite: SIGUSR1 stalls
				// this worker's governor for a minute (its heartbeat goes stale).
				usr := make(chan os.Signal, 1)
				signal.Notify(usr, syscall.SIGUSR1)
				go func() {
					for range usr {
						log.Warn("fault injection: governor stalled for 60s", "worker", id)
						g.Stall(60 * time.Second)
					}
				}()
			}
			w, err := scaleout.NewWorker(ctx, scaleout.WorkerOptions{Config: *cfg, ID: id, WorkDir: filepath.Join(home, "worker", id),
				Installed: in, Gates: g, NoSandbox: noSandbox, Log: log, Queues: queues, CardClass: scaleout.CardClass(cardName(ctx)),
				Study: study, Execution: execution})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "worker %s: serving %v on %s (namespace %s), spool %s\n", w.ID(), w.Queues(), cfg.Address, cfg.Namespace, cfg.Spool)
			return w.Run(ctx)
		},
	}
	cfg = engineFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "the worker's name in receipts and status (default HOST-PID)")
	cmd.Flags().StringVar(&installedEnv, "installed-env", provision.Path(), "env file naming the provisioned runtimes")
	cmd.Flags().StringSliceVar(&queues, "queue", nil, "serve these task queues instead of the ones this machine's builds name (each trial is still checked against this machine's builds)")
	cmd.Flags().StringVar(&study, "study", "", "refuse to start unless the spool holds this study's snapshot (with --execution)")
	cmd.Flags().StringVar(&execution, "execution", "", "the execution --study names")
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run runtimes without namespaces (recorded on every receipt)")
	cmd.Flags().BoolVar(&faults, "fault-injection", false, "let SIGUSR1 stall this worker's governor for 60s (the scale-out fault suite)")
	return cmd
}

// cardName is this machine's first NVIDIA card's name, empty without one.
func cardName(ctx context.Context) string {
	nv, err := governor.OpenNVML(ctx, 0)
	if err != nil {
		return ""
	}
	defer nv.Close()
	return nv.DeviceName()
}

func newEngineCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "engine", Short: "The scale-out engine (Temporal) on a single host"}
	var db, installedEnv string
	var port int
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Run the Temporal CLI's dev server on loopback, its state in a SQLite file",
		Long: `dev runs the Temporal dev server that make setup builds (temporal server
start-dev), bound to 127.0.0.1 with its web UI off and its state in --db, so
that a restart loses nothing. It is the engine for a single host and for
tests; a studio's production names an existing cluster instead.

  rig engine dev --db ~/.local/share/rig/temporal.db --port 7233 &
  rig daemon --temporal 127.0.0.1:7233 --spool ~/.local/share/rig/spool &
  rig worker --temporal 127.0.0.1:7233 --spool ~/.local/share/rig/spool &`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := provision.LoadFile(installedEnv)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			s := &scaleout.DevServer{Bin: in.Temporal, DB: db, Port: port, Log: db + ".log"}
			if err := s.Start(ctx); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "temporal dev server on %s (state %s, log %s)\n", s.Address(), db, s.Log)
			go func() { <-ctx.Done(); s.Stop() }()
			s.Wait()
			return nil
		},
	}
	dev.Flags().StringVar(&db, "db", filepath.Join(daemon.DefaultHome(), "temporal.db"), "the server's SQLite file")
	dev.Flags().IntVar(&port, "port", 7233, "the frontend's port on 127.0.0.1")
	dev.Flags().StringVar(&installedEnv, "installed-env", provision.Path(), "env file naming the provisioned components")
	cmd.AddCommand(dev)
	return cmd
}

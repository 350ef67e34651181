package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"rig/daemon"
	"rig/internal/metrics"
	"rig/internal/provision"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// engineFlags adds the flags naming the Temporal cluster and the spool, the
// same for the daemon (the coordinator) and a worker.
func engineFlags(cmd *cobra.Command) *daemon.EngineConfig {
	c := &daemon.EngineConfig{}
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
	var id, installedEnv, study, execution, models string
	var queues []string
	var noSandbox, faults, dryRun bool
	var card int
	var cfg *daemon.EngineConfig
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

It takes a trial only when it can run it now: its slots, shared by the
pollers of all its queues. It has one until it runs an arm whose design
pins slots N; it then starts that arm's runtime with N slots and takes up
to N of the arm's trials at once, each with its own receipt, grade and
rows (its log says "serves its arm's slots"; give the study's run an
--in-flight that counts slots, workers × N). It checks itself before it polls, and stops
polling while a check fails (saying why in its log, at start and every
minute, and on /healthz):
  - its governor not ready (fault suite not passed, heartbeat stale, a
    policy held);
  - the snapshot of the --study it was started for not in the spool;
  - a model a trial names not here: models are found by sha256 in this
    worker's cache or the --models folder, not at the coordinator's path;
  - no queue its runtime builds serve.
It refuses, without running anything, a trial whose runtime build differs
from this machine's (and then stops serving that queue), a trial of a study
whose snapshot the spool does not hold, and a trial that arrives while
its slots are taken or another arm's trials run (it goes back to its queue
at once).

It serves Prometheus metrics at http://127.0.0.1:9480/metrics and its health
at /healthz on the same address (200 while polling, 503 with the reasons;
--metrics HOST:PORT elsewhere, off for none; give each worker its own).

Launch one per card (--card N, the card's NVML index) with what the site
already runs: deploy/systemd, deploy/slurm (sbatch --array) or
deploy/kubernetes. --dry-run prints where a worker would look (its folders
and the fault-suite pass its governor would find) without connecting. See
docs/scale-out.md.

  rig engine dev --db /var/lib/rig/temporal.db &      a single host's server
  rig worker --temporal 127.0.0.1:7233 --spool /srv/rig-spool
  rig worker --temporal temporal.studio:7233 --temporal-tls --spool /mnt/rig --id gpu07`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			o := daemon.WorkerOptions{Engine: *cfg, ID: id, Card: card, Home: homeDir(cmd), InstalledEnv: installedEnv,
				Queues: queues, Study: study, Execution: execution, ModelsDir: models, NoSandbox: noSandbox, FaultInjection: faults, Log: log}
			if dryRun {
				o.Settings().Print(cmd.OutOrStdout(), time.Now())
				return nil
			}
			m, err := workerMetrics(cmd) // metrics (metrics.go): nil with --metrics off
			if err != nil {
				return err
			}
			o.Metrics = m
			o.Started = func(ctx context.Context, ready func(context.Context) error) error {
				return serveWorkerMetrics(ctx, cmd, m, ready, log)
			}
			return daemon.RunWorker(ctx, o, cmd.OutOrStdout())
		},
	}
	cfg = engineFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "the worker's name in receipts and status (default HOST-PID)")
	cmd.Flags().IntVar(&card, "card", 0, "the card this worker runs on, by NVML index as nvidia-smi lists them (one worker per card; pair it with CUDA_VISIBLE_DEVICES=N and CUDA_DEVICE_ORDER=PCI_BUS_ID)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the settings this worker would run with (id, card, folders, the fault-suite pass its governor would find) and exit without connecting")
	cmd.Flags().StringVar(&installedEnv, "installed-env", provision.Path(), "env file naming the provisioned runtimes")
	cmd.Flags().StringSliceVar(&queues, "queue", nil, "serve these task queues instead of the ones this machine's builds name (each trial is still checked against this machine's builds)")
	cmd.Flags().StringVar(&study, "study", "", "refuse to start unless the spool holds this study's snapshot (with --execution)")
	cmd.Flags().StringVar(&execution, "execution", "", "the execution --study names")
	cmd.Flags().StringVar(&models, "models", os.Getenv("RIG_MODELS"), "a shared models folder ($RIG_MODELS): a model not provisioned in this worker's cache is found here by its sha256 (file SHA256, SHA256.gguf or sha256-SHA256), never by the coordinator's path")
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run runtimes without namespaces (recorded on every receipt)")
	metricsFlag(cmd, metrics.WorkerAddr)
	cmd.Flags().BoolVar(&faults, "fault-injection", false, "let SIGUSR1 stall this worker's governor for 60s (the scale-out fault suite)")
	return cmd
}

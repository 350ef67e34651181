package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"rig/api"
	"rig/governor"
	"rig/internal/cgroup"
	"rig/internal/metrics"
	"rig/internal/provision"
	"rig/run/gates"
	"rig/scaleout"
)

// The entry points of the processes the command line starts in-process: the
// daemon itself (Run, in resident.go), a scale-out worker, the engine's dev
// server, and a re-grade with no daemon running. They are here so that
// cmd/rig needs neither the engine, the governor nor the store: everything
// else it does goes through api.Client.

// EngineConfig names the Temporal cluster and the spool, for the daemon
// (the coordinator) and for a worker alike.
type EngineConfig = scaleout.Config

// The engine's defaults for `rig study run --engine temporal`, as the
// command line shows them.
const (
	EngineDefaultInFlight  = scaleout.DefaultInFlight
	EngineDefaultStartWait = scaleout.DefaultStartWait
)

// DefaultHome is $RIG_HOME, else ~/.local/share/rig.
func DefaultHome() string { return api.DefaultHome() }

// WorkerOptions are `rig worker`'s settings.
type WorkerOptions struct {
	Engine EngineConfig
	// ID is the worker's name in receipts and status; empty: HOST-PID.
	ID string
	// Card is the NVML index of the card this worker runs on (nvidia-smi's
	// order): its governor watches that card and its queues name it.
	Card int
	// Home is RIG_HOME: the worker works under Home/worker/ID.
	Home string
	// InstalledEnv is the env file naming the provisioned runtimes.
	InstalledEnv string
	// Queues, when set, are served instead of those this machine's builds
	// name (each trial is still checked against this machine's builds).
	Queues []string
	// Study and Execution, when set, make the worker refuse to start unless
	// the spool holds that study's snapshot.
	Study, Execution string
	// ModelsDir is a shared models folder where a model not provisioned in
	// the worker's cache is found by its sha256 (docs/scale-out.md).
	ModelsDir string
	NoSandbox bool
	// FaultInjection lets SIGUSR1 stall the worker's governor for a minute
	// (its heartbeat goes stale): the scale-out fault suite.
	FaultInjection bool
	Log            *slog.Logger
	// Metrics, when set, counts the worker's trial attempts (through the
	// engine's client) and its governor's events.
	Metrics *metrics.Set
	// Started, when set, is called once the worker is connected and before
	// it takes trials, with its readiness (nil while it polls, else every
	// check it fails: to serve the metrics and /healthz); an error from it
	// stops the worker.
	Started func(ctx context.Context, ready func(context.Context) error) error
}

// RunWorker runs a scale-out worker until ctx ends: its own governor and
// heartbeat, then trials handed out by Temporal. The line saying what it
// serves goes to out once it is connected.
func RunWorker(ctx context.Context, o WorkerOptions, out io.Writer) error {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	in, err := provision.LoadFile(o.InstalledEnv)
	if err != nil {
		return err
	}
	s := o.Settings()
	id := s.ID
	// The governor's host sensor reads the home's disk from its first
	// evaluation: a home not made yet would hold the worker as a lost sensor.
	if err := os.MkdirAll(s.WorkDir, 0o700); err != nil {
		return fmt.Errorf("the worker's folder under RIG_HOME: %w", err)
	}
	o.Engine.Metrics = o.Metrics
	// A worker killed while a runtime ran in a simulated card left that
	// card's cgroup behind; a worker-only machine has no coordinator to
	// remove it, so each worker does at start (only groups whose rig
	// process is dead).
	if removed, err := cgroup.CleanupStale(ctx); err != nil && !errors.Is(err, cgroup.ErrNoCgroup) {
		log.Warn("removing stale card reservations", "err", err)
	} else if len(removed) > 0 {
		log.Info("removed stale card reservations", "cgroups", removed)
	}
	g, err := gates.Start(ctx, gates.Options{Home: o.Home, Sink: governor.Sinks{governor.SlogSink{Logger: log}, GovernorMetrics{M: o.Metrics}}, Log: log,
		Heartbeat: s.Heartbeat, Card: s.Card})
	if err != nil {
		return err
	}
	if o.FaultInjection {
		usr := make(chan os.Signal, 1)
		signal.Notify(usr, syscall.SIGUSR1)
		defer signal.Stop(usr)
		go func() {
			for range usr {
				log.Warn("fault injection: governor stalled for 60s", "worker", id)
				g.Stall(60 * time.Second)
			}
		}()
	}
	w, err := scaleout.NewWorker(ctx, scaleout.WorkerOptions{Config: o.Engine, ID: id, WorkDir: s.WorkDir,
		Installed: in, Gates: g, NoSandbox: o.NoSandbox, Log: log, Queues: o.Queues, CardClass: cardClass(ctx, s.Card),
		Study: o.Study, Execution: o.Execution, ModelsDir: o.ModelsDir})
	if err != nil {
		return err
	}
	o.Metrics.TaskQueues(w.Queues()) // their started counts at 0 before the first trial
	WatchFaultPass(o.Metrics, s.StateDir)
	if o.Started != nil {
		if err := o.Started(ctx, w.Ready); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "worker %s: serving %v on %s (namespace %s), spool %s\n", w.ID(), w.Queues(), o.Engine.Address, o.Engine.Namespace, o.Engine.Spool)
	return w.Run(ctx)
}

// cardClass is the card class of this machine's NVIDIA card at index, by
// NVML's name and memory (scaleout.CardClass); "cpu" without one.
func cardClass(ctx context.Context, index int) string {
	nv, err := governor.OpenNVML(ctx, index)
	if err != nil {
		return scaleout.CardClass("", 0)
	}
	defer nv.Close()
	var total uint64
	if r, err := nv.Read(ctx); err == nil {
		total = uint64(r.Values[governor.KeyCardTotalBytes])
	}
	return scaleout.CardClass(nv.DeviceName(), total)
}

// EngineDevOptions are `rig engine dev`'s settings.
type EngineDevOptions struct {
	InstalledEnv string // names the provisioned Temporal CLI
	DB           string // the server's SQLite file
	Port         int    // the frontend's port on 127.0.0.1
}

// RunEngineDev runs the Temporal CLI's dev server on loopback until ctx
// ends; where it listens goes to out once it is up. It returns nil when ctx
// ended it, and an error quoting the server's last log lines when the server
// exited on its own, so that a supervisor restarting on failure restarts it.
func RunEngineDev(ctx context.Context, o EngineDevOptions, out io.Writer) error {
	in, err := provision.LoadFile(o.InstalledEnv)
	if err != nil {
		return err
	}
	s := &scaleout.DevServer{Bin: in.Temporal, DB: o.DB, Port: o.Port, Log: o.DB + ".log"}
	if err := s.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "temporal dev server on %s (state %s, log %s)\n", s.Address(), o.DB, s.Log)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			s.Stop()
		case <-stopped:
		}
	}()
	return s.Wait()
}

// RegradeWithoutDaemon is `rig grade --regrade` when no daemon runs: it
// opens the study's store under home itself (the daemon holds it open
// otherwise) and re-grades as the daemon would.
func RegradeWithoutDaemon(ctx context.Context, home string, req api.RegradeRequest) (api.RegradeReport, error) {
	svc, err := NewService(home, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return api.RegradeReport{}, err
	}
	defer svc.Close()
	rep, err := svc.Reports().Regrade(ctx, req)
	if err != nil || rep == nil {
		return api.RegradeReport{}, err
	}
	return *rep, nil
}

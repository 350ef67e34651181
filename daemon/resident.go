package daemon

import (
	"context"
	"errors"
	"log/slog"

	"rig/preflight"
)

// Options are the resident daemon's settings, as `rig daemon` parsed them.
type Options struct {
	Home      string // RIG_HOME: studies live under Home/studies
	Socket    string // the unix socket the command line calls
	NoSandbox bool   // run runtimes without network namespaces (recorded on every receipt)
	Log       *slog.Logger
}

// Run is the resident daemon: it takes the machine-wide lock, starts the
// governor, removes card reservations a killed daemon left, resumes every
// execution that was running, and serves the command line until ctx ends.
func Run(ctx context.Context, opts Options) error {
	log := opts.Log
	if log == nil {
		log = slog.Default()
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
	gov, err := StartGovernor(ctx, svc, log)
	if err != nil {
		return err
	}
	svc.Gates = gov
	// A daemon killed while a runtime ran in a simulated card left that
	// card's cgroup behind; remove it before anything resumes.
	if removed, err := preflight.CleanupStale(ctx); err != nil && !errors.Is(err, preflight.ErrNoCgroup) {
		log.Warn("removing stale card reservations", "err", err)
	} else if len(removed) > 0 {
		log.Info("removed stale card reservations", "cgroups", removed)
	}
	if resumed, err := svc.Resume(ctx); err != nil {
		log.Error("resuming executions", "err", err)
	} else {
		for _, r := range resumed {
			log.Info("resumed", "execution", r.ID, "done", r.Done)
		}
	}
	log.Info("rig daemon serving", "socket", opts.Socket, "home", opts.Home)
	return svc.Serve(ctx, opts.Socket)
}

package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"rig/governor"
	"rig/runtimes"
	"rig/studies/run"
)

// governorGates puts the daemon's governor in front of the study run loop:
// Ready is the gate before counted runs, Watch guards each trial.
type governorGates struct {
	gov       *governor.Governor
	progress  *governor.Progress
	stateDir  string
	heartbeat string
	interval  time.Duration
	maxAge    time.Duration
}

// storeSink sends every governor event to the running study's store and
// then to the daemon log. The store comes first so that an event the log
// shows is already durable when the daemon dies right after it.
type storeSink struct {
	svc *Service
	log *slog.Logger
}

func (s storeSink) Emit(ctx context.Context, e governor.Event) error {
	s.svc.RecordGovernorEvent(ctx, e.At, e.TrialID, string(e.Kind), e)
	s.log.Info("governor", "kind", e.Kind, "trial", e.TrialID, "policy", e.Policy, "reason", e.Reason)
	return nil
}

func StartGovernor(ctx context.Context, svc *Service, log *slog.Logger) (*governorGates, error) {
	stateDir := governor.DefaultStateDir()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	cfg := governor.DefaultConfig()
	if path := filepath.Join(svc.Home, "governor.json"); fileExists(path) {
		c, err := governor.LoadConfig(path)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	progress := governor.NewProgress()
	sensors := []governor.Sensor{governor.NewHost(svc.Home), progress}
	// rig's own memory cgroup holds the daemon and every runtime it starts:
	// an OOM kill there is the host running out, which preempts the trial.
	if dir, err := governor.SelfCgroupDir(); err == nil {
		sensors = append(sensors, governor.NewCgroup("cgroup", dir))
	} else {
		log.Info("no memory cgroup readable: the cgroup-oom policy is off", "reason", err)
		cfg.Disable(governor.PolicyCgroupOOM)
	}
	if nv, err := governor.OpenNVML(ctx, 0); err == nil {
		sensors = append(sensors, nv)
	} else {
		// No card: the GPU policies have nothing to read. They stay off rather
		// than failing closed forever; the suite says so when it runs them on
		// simulated sensors.
		log.Info("no NVIDIA GPU/NVML on this machine: the NVML-backed policies are off for this daemon", "policies", governor.GPUPolicies(), "reason", err)
		cfg.Disable(governor.GPUPolicies()...)
	}
	hb := filepath.Join(stateDir, "heartbeat")
	gov, err := governor.New(governor.Options{Config: cfg, Sensors: sensors, Sink: storeSink{svc, log}, Logger: log,
		Notifier: governor.NotifierFromEnv(), HeartbeatPath: hb})
	if err != nil {
		return nil, err
	}
	go func() {
		if err := gov.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("governor stopped", "err", err)
		}
	}()
	return &governorGates{gov: gov, progress: progress, stateDir: stateDir, heartbeat: hb, interval: cfg.Heartbeat, maxAge: governor.DefaultPassMaxAge}, nil
}

// MayStart says whether the governor would let a trial start now, and why
// not: the workspace shows it as the governor's state.
func (g *governorGates) MayStart() (bool, string) { return g.gov.MayStart() }

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Ready refuses counted runs unless the fault suite passed within maxAge, the
// heartbeat is fresh and the governor holds no policy open.
func (g *governorGates) Ready(ctx context.Context) error {
	if err := governor.ReadyForCounted(g.stateDir, g.maxAge, g.heartbeat, g.interval, time.Now()); err != nil {
		return err
	}
	if ok, why := g.gov.MayStart(); !ok {
		return &governor.HeldError{Reason: why}
	}
	return nil
}

type trialGuard struct {
	w       *governor.Watch
	done    chan struct{}
	once    sync.Once
	stopped chan struct{}
	g       *governorGates
}

func (t *trialGuard) Preempted() <-chan struct{} { return t.done }

func (t *trialGuard) End() string {
	t.once.Do(func() { close(t.stopped) })
	t.g.progress.End()
	if p := t.w.End(); p != nil {
		return p.Policy + ": " + p.Reason
	}
	return ""
}

// Watch registers the trial with the governor. Calls are not streamed, so
// progress is the CPU time the runtime's process tree spends on the call: a
// runtime that stops computing mid-call is hung, and a stopped one (SIGSTOP)
// reads as stopped at once.
func (g *governorGates) Watch(ctx context.Context, trial string, sb *runtimes.Sandbox, cardBytes uint64) (run.TrialGuard, error) {
	w, err := g.gov.Begin(governor.ProcessTarget{TrialID: trial, Pid: sb.PID(), Done: sb.Done()}, governor.Budget{CardMemBytes: cardBytes})
	if err != nil {
		return nil, err
	}
	g.progress.Begin()
	g.progress.Track(sb.RuntimePID)
	t := &trialGuard{w: w, done: make(chan struct{}), stopped: make(chan struct{}), g: g}
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		base := runtimes.TreeCPUTicks(sb.RuntimePID)
		for {
			select {
			case <-t.stopped:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			g.progress.Tokens(runtimes.TreeCPUTicks(sb.RuntimePID) - base)
			if w.Cause() != nil {
				close(t.done)
				return
			}
		}
	}()
	return t, nil
}

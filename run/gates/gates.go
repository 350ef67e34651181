// Package gates is the trial runner's adapter to the governor: Start starts
// a governor on this machine's sensors, and the result is the runner's
// run.Gates (Ready, the gate before counted runs) and run.TrialGuard maker
// (Watch, which guards each trial's runtime sandbox). Both the daemon and a
// scale-out worker host a runner, so both start their governor here, the
// same way. It is not the governor itself (package governor, a leaf that
// knows no runtime or study) and it decides nothing about a study.
package gates

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"rig/governor"
	"rig/run"
	"rig/runtimes"
)

// Gates is a started governor wired as run.Gates.
type Gates struct {
	gov       *governor.Governor
	energy    governor.EnergyCounter // the card's energy counter; nil without one
	gpu       governor.Sensor        // the card's sensor; nil without one
	progress  *governor.Progress
	stateDir  string
	heartbeat string
	interval  time.Duration
	maxAge    time.Duration
}

// Options says where the governor keeps its state and where its events go.
type Options struct {
	// Home holds an optional governor.json (the policies' limits).
	Home string
	// Sink gets every governor event.
	Sink governor.EventSink
	Log  *slog.Logger
	// Heartbeat is the heartbeat file; empty means the state directory's
	// "heartbeat". Each process that hosts a runner beside others on one
	// machine (several workers) gives its own, so that one stale governor
	// holds only its own trials.
	Heartbeat string
	// GPU stands in for the card's NVML sensor: a simulated one for fault
	// injection and for the energy path's tests. Nil opens NVML.
	GPU governor.Sensor
	// Card is the NVML index of the card to watch (nvidia-smi's order): a
	// worker per card on a multi-GPU machine each watches its own.
	Card int
}

// Start starts a governor on this machine's sensors: the host, the runtime's
// progress, rig's memory cgroup where one is readable, and the NVIDIA card
// opts.Card where NVML answers. Policies whose sensor is missing are off, and
// the log says so; a card other than 0 that NVML cannot open is an error. The governor runs until ctx ends.
func Start(ctx context.Context, opts Options) (*Gates, error) {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	stateDir := governor.DefaultStateDir()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	cfg := governor.DefaultConfig()
	if path := filepath.Join(opts.Home, "governor.json"); opts.Home != "" && fileExists(path) {
		c, err := governor.LoadConfig(path)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	progress := governor.NewProgress()
	sensors := []governor.Sensor{governor.NewHost(opts.Home), progress}
	// rig's own memory cgroup holds the process and every runtime it starts:
	// an OOM kill there is the host running out, which preempts the trial.
	if dir, err := governor.SelfCgroupDir(); err == nil {
		sensors = append(sensors, governor.NewCgroup("cgroup", dir))
	} else {
		log.Info("no memory cgroup readable: the cgroup-oom policy is off", "reason", err)
		cfg.Disable(governor.PolicyCgroupOOM)
	}
	var energy governor.EnergyCounter
	gpu := opts.GPU
	var gpuErr error
	if gpu == nil {
		var nv *governor.NVML
		if nv, gpuErr = governor.OpenNVML(ctx, opts.Card); gpuErr == nil {
			gpu = nv
		} else if opts.Card != 0 {
			// A card named on purpose and not found is a misconfigured
			// worker, not a machine without a GPU: watching nothing would
			// let its trials run unguarded.
			return nil, fmt.Errorf("card %d: %w (the card index is NVML's, as nvidia-smi lists the cards)", opts.Card, gpuErr)
		}
	}
	if gpu != nil {
		sensors = append(sensors, gpu)
		if ec, ok := gpu.(governor.EnergyCounter); ok {
			if _, ok := ec.EnergyJoules(); ok {
				energy = ec
			}
		}
	} else {
		// No card: the GPU policies have nothing to read. They stay off rather
		// than failing closed forever; the suite says so when it runs them on
		// simulated sensors.
		log.Info("no NVIDIA GPU/NVML on this machine: the NVML-backed policies are off", "policies", governor.GPUPolicies(), "reason", gpuErr)
		cfg.Disable(governor.GPUPolicies()...)
	}
	hb := opts.Heartbeat
	if hb == "" {
		hb = filepath.Join(stateDir, "heartbeat")
	}
	gov, err := governor.New(governor.Options{Config: cfg, Sensors: sensors, Sink: opts.Sink, Logger: log,
		Notifier: governor.NotifierFromEnv(), HeartbeatPath: hb})
	if err != nil {
		return nil, err
	}
	go func() {
		if err := gov.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("governor stopped", "err", err)
		}
	}()
	return &Gates{gov: gov, energy: energy, gpu: gpu, progress: progress, stateDir: stateDir, heartbeat: hb, interval: cfg.Heartbeat, maxAge: governor.DefaultPassMaxAge}, nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Stall stops the governor's loop for d (no reads, no heartbeat): the
// fault-injection hook a worker's --fault-injection exposes, so that the
// scale-out suite can show a stale worker stops taking trials.
func (g *Gates) Stall(d time.Duration) { g.gov.Stall(d) }

// Ready refuses counted runs unless the fault suite passed within maxAge, the
// heartbeat is fresh and the governor holds no policy open.
func (g *Gates) Ready(ctx context.Context) error {
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
	exited  chan struct{} // closed when the watch goroutine has returned
	tracked bool          // the card's per-process memory was tracked
	g       *Gates
	// energyAt is the card's energy counter when the trial began; energy
	// is what it had counted when the trial ended (valid once ended).
	energyAt, energy float64
	measured, ended  bool
	// call is the trial's id in the progress sensor; fed is set once the
	// runner feeds the call's own progress (Progress), after which the
	// runtime's CPU time no longer speaks for it.
	call string
	fed  atomic.Bool
}

// Progress feeds the trial's own progress: the tokens the runtime reports
// for the trial's request alone (its slot's count). With several trials in
// flight on one runtime, the process's CPU time advances while any of them
// does; this is what lets a slot that stops be seen while the others run.
func (t *trialGuard) Progress(total int) {
	t.fed.Store(true)
	t.g.progress.TokensOf(t.call, total)
}

func (t *trialGuard) Preempted() <-chan struct{} { return t.done }

func (t *trialGuard) End() string {
	t.once.Do(func() {
		close(t.stopped)
		<-t.exited // no re-tracking after the reset below
		if tr, ok := t.g.gpu.(interface{ Track(pids ...int) }); ok && t.tracked {
			tr.Track() // between trials the whole card's memory is read
		}
		if t.measured {
			now, ok := t.g.energy.EnergyJoules()
			t.energy, t.measured = now-t.energyAt, ok && now >= t.energyAt
		}
		t.ended = true
	})
	t.g.progress.EndCall(t.call)
	if p := t.w.End(); p != nil {
		return p.Policy + ": " + p.Reason
	}
	return ""
}

// Watch registers the trial with the governor. Calls are not streamed, so
// progress is the CPU time the runtime's process tree spends on the call: a
// runtime that stops computing mid-call is hung, and a stopped one (SIGSTOP)
// reads as stopped at once. Each trial is its own call in the progress
// sensor; a trial in flight beside others is fed its own slot's count
// instead once the runner has one (Progress).
func (g *Gates) Watch(ctx context.Context, trial string, sb *runtimes.Sandbox, cardBytes uint64) (run.TrialGuard, error) {
	w, err := g.gov.Begin(governor.ProcessTarget{TrialID: trial, Pid: sb.PID(), Done: sb.Done()}, governor.Budget{CardMemBytes: cardBytes})
	if err != nil {
		return nil, err
	}
	g.progress.BeginCall(trial)
	g.progress.TrackCall(trial, sb.RuntimePID)
	// Only a runtime that holds its model on the card is held to its own
	// card memory and has its energy measured; a CPU arm's trial reads the
	// whole card, as before offload was a pin.
	tracker, tracks := g.gpu.(interface{ Track(pids ...int) })
	tracks = tracks && sb.OnCard && sb.RuntimePID > 0
	if tracks {
		// The card's memory that counts against the trial's budget is its
		// runtime's own, per process, not the whole card's.
		tracker.Track(runtimes.ProcessTree(sb.RuntimePID)...)
	}
	t := &trialGuard{w: w, done: make(chan struct{}), stopped: make(chan struct{}), exited: make(chan struct{}), g: g, tracked: tracks, call: trial}
	if g.energy != nil && sb.OnCard {
		// The runtime has loaded its model by now: the counter from here
		// on is the trial's own work.
		t.energyAt, t.measured = g.energy.EnergyJoules()
	}
	go func() {
		defer close(t.exited)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		base := runtimes.TreeCPUTicks(sb.RuntimePID)
		for n := 1; ; n++ {
			select {
			case <-t.stopped:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !t.fed.Load() {
				g.progress.TokensOf(trial, runtimes.TreeCPUTicks(sb.RuntimePID)-base)
			}
			if tracks && n%10 == 0 {
				// A runtime may start a child mid-trial (Ollama's runner):
				// its card memory counts too.
				tracker.Track(runtimes.ProcessTree(sb.RuntimePID)...)
			}
			if w.Cause() != nil {
				close(t.done)
				return
			}
		}
	}()
	return t, nil
}

// TrialEnergy is the energy the card's counter measured over the trial,
// once End has been called; ok is false where no counter exists (the
// receipt then carries no measured energy and the report estimates it).
func (t *trialGuard) TrialEnergy() (joules float64, ok bool) {
	return t.energy, t.measured && t.ended
}

// MayStart says whether the governor would let a trial start now, and why
// not when it would not (the workspace's governor state).
func (g *Gates) MayStart() (bool, string) { return g.gov.MayStart() }

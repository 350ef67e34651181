package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"rig/governor"
)

// SoakResult counts what a soak of normal generation saw. Every preemption
// in a soak is a false one: nothing was wrong on purpose.
type SoakResult struct {
	Duration         time.Duration         `json:"duration"`
	Trials           int                   `json:"trials"`
	Tokens           int64                 `json:"tokens"`
	FalsePreemptions []governor.Preemption `json:"false_preemptions"`
	// Stalls are calls that produced no tokens for the harness's 60 s wait
	// while the governor (under its limits) had not acted: the runtime
	// restarted and the soak went on. They are reported, not hidden.
	Stalls  []string `json:"stalls,omitempty"`
	Sensors []string `json:"sensors"`
	Notes   []string `json:"notes,omitempty"`
}

// Soak runs normal generation on the real llama-server for d under a
// governor with real sensors (host, this process's memory cgroup, NVML when
// present, progress) and counts false preemptions; the goal is zero over
// ten minutes. It runs under opts.Config, else DefaultConfig. It needs
// installed.env (ErrNotInstalled otherwise).
func Soak(ctx context.Context, w io.Writer, d time.Duration, opts Options) (SoakResult, error) {
	// A soak judges the configuration counted runs use, so it defaults to
	// DefaultConfig, not the suite's short dwells: a false preemption under
	// the production limits is the one that costs a rerun.
	cfg := governor.DefaultConfig()
	if opts.Config != nil {
		cfg = opts.Config.Clone()
	}
	opts = opts.withDefaults()
	inst, err := loadRuntime(opts.InstalledEnv)
	if err != nil {
		return SoakResult{}, err
	}
	work := opts.WorkDir
	if work == "" {
		dir, err := os.MkdirTemp("", "rig-governor-soak-*")
		if err != nil {
			return SoakResult{}, err
		}
		defer os.RemoveAll(dir)
		work = dir
	}
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return SoakResult{}, err
	}
	var res SoakResult
	prog := governor.NewProgress()
	sensors, closeNVML := soakSensors(ctx, &cfg, opts.StateDir, prog, &res)
	defer closeNVML()
	events := &eventLog{}
	g, err := governor.New(governor.Options{Config: cfg, Sensors: sensors, Sink: governor.Sinks{events, governor.SlogSink{Logger: opts.Logger}}})
	if err != nil {
		return res, err
	}
	e := &suiteEnv{g: g, prog: prog, events: events, dir: work}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(rctx) }()
	defer func() { cancel(); <-done }()

	fmt.Fprintf(w, "soak: %s of normal generation on %s; config: %s\n", d, filepath.Base(inst.model.Path), configLine(cfg))
	for _, n := range res.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	start := time.Now()
	var run *suiteRun
	defer func() {
		if run != nil {
			run.stop()
		}
	}()
	for time.Since(start) < d && ctx.Err() == nil {
		if run == nil || run.exited() {
			if run, err = startRuntime(ctx, e, true, inst, "soak"); err != nil {
				return res, err
			}
		}
		if ok, why := e.waitGate(ctx, 10*time.Second); !ok {
			return res, fmt.Errorf("soak: gate stayed closed for 10s: %s", why)
		}
		stalled, err := soakTrial(ctx, w, g, run, &res)
		if err != nil {
			return res, err
		}
		if stalled {
			run.stop()
			run = nil
		}
	}
	res.Duration = time.Since(start)
	verdict := "met"
	if len(res.FalsePreemptions) > 0 {
		verdict = "NOT met"
	}
	fmt.Fprintf(w, "soak: %d trials, %d tokens in %s, %d false preemptions (goal zero over 10 minutes: %s for this %s), %d runtime stalls\n",
		res.Trials, res.Tokens, res.Duration.Round(time.Second), len(res.FalsePreemptions), verdict, res.Duration.Round(time.Second), len(res.Stalls))
	return res, ctx.Err()
}

// soakSensors opens the real sensors the soak runs under: the host's, prog,
// NVML when there is a card and this process's memory cgroup when readable.
// A policy whose sensor is missing is turned off in cfg, with a note in res.
// closeNVML closes the NVML sensor, if one was opened.
func soakSensors(ctx context.Context, cfg *governor.Config, stateDir string, prog *governor.Progress, res *SoakResult) (sensors []governor.Sensor, closeNVML func()) {
	closeNVML = func() {}
	sensors = []governor.Sensor{governor.NewHost(stateDir), prog}
	if n, err := governor.OpenNVML(ctx, 0); err != nil {
		cfg.Disable(governor.GPUPolicies()...)
		res.Notes = append(res.Notes, "no NVIDIA GPU/NVML on this machine ("+err.Error()+"): the NVML-backed policies are off for the soak; rig governor faults runs them on simulated sensors")
	} else {
		closeNVML = func() { n.Close() }
		sensors = append(sensors, n)
	}
	if dir, err := governor.SelfCgroupDir(); err != nil {
		cfg.Disable(governor.PolicyCgroupOOM)
		res.Notes = append(res.Notes, "no memory cgroup readable: cgroup-oom off for the soak")
	} else {
		sensors = append(sensors, governor.NewCgroup("cgroup", dir))
	}
	for _, s := range sensors {
		res.Sensors = append(res.Sensors, s.Name())
	}
	return sensors, closeNVML
}

// soakTrial runs one trial of normal generation on run under g and counts
// it in res: a preemption of it is a false one, and a call that fails
// otherwise is a runtime stall, after which the runtime is restarted.
func soakTrial(ctx context.Context, w io.Writer, g *governor.Governor, run *suiteRun, res *SoakResult) (stalled bool, err error) {
	res.Trials++
	id := fmt.Sprintf("soak-%04d", res.Trials)
	run.target = run.llama.target(id)
	watch, err := g.Begin(run.target, governor.Budget{})
	if err != nil {
		return false, err
	}
	run.follow(watch, 64)
	cerr := run.complete(ctx, 0)
	res.Tokens += run.tokens.Load()
	run.endCall()
	if p := watch.End(); p != nil {
		res.FalsePreemptions = append(res.FalsePreemptions, *p)
		fmt.Fprintf(w, "FALSE PREEMPTION %s: %s: %s\n", id, p.Policy, p.Reason)
		<-watch.Stopped()
		return false, nil
	}
	if cerr != nil && !errors.Is(cerr, context.Canceled) {
		res.Stalls = append(res.Stalls, id+": "+cerr.Error())
		fmt.Fprintf(w, "RUNTIME STALL %s: %v (runtime restarted)\n", id, cerr)
		return true, nil
	}
	return false, nil
}

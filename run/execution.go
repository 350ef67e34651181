package run

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/cgroup"
	"rig/internal/layout"
	"rig/preflight"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
)

// Gates are the checks before a counted run, and the governor's watch over
// each trial. The daemon wires them to the governor; nil gates refuse.
type Gates interface {
	// Ready is nil when counted runs may start: the governor's fault suite
	// passed recently and its heartbeat is fresh.
	Ready(ctx context.Context) error
	// Watch guards one running trial. It fails while the governor holds the
	// queue, so a trial cannot slip in between the check and its start.
	// cardBytes is the card memory the trial is held to: on a real GPU the
	// governor preempts a runtime whose card memory goes above it.
	Watch(ctx context.Context, trial string, sb *runtimes.Sandbox, cardBytes uint64) (TrialGuard, error)
}

// TrialGuard is the governor's hold on one running trial.
type TrialGuard interface {
	// Preempted is closed when the governor preempts the trial.
	Preempted() <-chan struct{}
	// End ends the watch and returns the preemption's reason if one came
	// first: the result must then not be scored.
	End() string
}

// EnergyMeter is a TrialGuard that measured the trial's energy on the
// card's own counter (NVML); a guard without one leaves the energy to the
// report's estimate.
type EnergyMeter interface {
	TrialEnergy() (joules float64, ok bool)
}

// ErrGate means a gate before counted runs refused.
var ErrGate = errors.New("gate refused")

// ExecInfo is an execution's progress.
type ExecInfo struct {
	ID         string    `json:"id"`
	Parent     string    `json:"parent,omitempty"`
	Attempt    int       `json:"attempt"`
	Status     string    `json:"status"`
	Planned    int       `json:"planned"`
	Done       int       `json:"done"`
	Preempted  int       `json:"preempted"`
	Failed     int       `json:"failed"` // trials whose receipt is an error: not scored, not retried in this execution
	Current    string    `json:"current,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	RatePerMin float64   `json:"rate_per_min"`
	ETA        string    `json:"eta,omitempty"`
	Error      string    `json:"error,omitempty"`
	Records    string    `json:"records,omitempty"` // directory of the generation records
	// Walls says how each auto wall cap was derived for this execution.
	Walls []string `json:"walls,omitempty"`
	// Engine is "temporal" for an execution spread over workers; empty for
	// one on the daemon's own card.
	Engine string `json:"engine,omitempty"`
	// Workers counts the receipts each worker returned (engine runs).
	Workers map[string]int `json:"workers,omitempty"`
}

// execution is one running Execution's working state on this machine: the
// plan's loop around the one trial runner, with the study's store and the
// execution's records as its sink, the monitor, the judge phase and the
// progress a Handle shows.
type execution struct {
	*trialRunner
	store   *receipts.Store
	recDir  string
	state   *Handle
	writers map[string]*genrecord.Writer
	// ended is told once the execution has ended and its status is stored.
	ended func(ctx context.Context, kind, why string)
	// mon is the design's stopping rule at work, nil without one; notRun
	// are the planned trials an early stop left unrun.
	mon    *monitor
	notRun []string
	// prices are the dry run's price of one trial per arm, for the ETA
	// until an arm's own trials are measured (Spec.Prices).
	prices map[string]time.Duration
}

// records is the execution's folder as the layout names its files.
func (x *execution) records() layout.Records { return layout.Records(x.recDir) }

// loop runs every planned trial that has no counted receipt yet.
func (x *execution) loop(ctx context.Context) error {
	plan, err := PlanOf(x.design, x.snap, x.exec)
	if err != nil {
		return err
	}
	if err := x.cardPlan(ctx, plan); err != nil {
		return err
	}
	if err := KeepPlan(x.records(), plan); err != nil {
		return err
	}
	if err := x.recoverPreemptions(ctx); err != nil {
		return err
	}
	counted, err := x.store.Counted(ctx, x.exec.ID)
	if err != nil {
		return err
	}
	x.state.mu.Lock()
	x.state.info.Planned = len(plan.Trials)
	x.state.info.Done = len(counted)
	x.state.mu.Unlock()
	if x.mon, err = newMonitor(x.design, plan); err != nil {
		return err
	}
	defer func() {
		for _, w := range x.writers {
			w.Close()
		}
	}()
	defer x.release(context.Background())
	sink := storeSink{x}
	started := time.Now()
	doneAtStart := len(counted)
	est := newETA(x.prices)
	if left := est.left(remaining(plan, -1, counted)); left > 0 {
		// Before a trial is measured: the dry run's table.
		x.state.mu.Lock()
		x.state.info.ETA = left.Round(time.Second).String()
		x.state.mu.Unlock()
	}
	for i, t := range plan.Trials {
		if rc, ok := counted[receiptTrial(t.Key)]; ok {
			// A resumed execution replays its receipts through the monitor
			// in plan order, so it reaches the checks it made before.
			if x.mon != nil {
				x.mon.record(rc)
				if err := x.checkStop(ctx, plan, i, counted); errors.Is(err, ErrStoppedEarly) {
					return x.stopEarly(ctx, err)
				} else if err != nil {
					return err
				}
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		began := time.Now()
		for {
			x.state.mu.Lock()
			x.state.info.Current = t.Key.String()
			x.state.mu.Unlock()
			outcome, err := x.Trial(ctx, sink, t.Key)
			if err != nil {
				return err
			}
			if outcome == receipts.Error {
				x.state.mu.Lock()
				x.state.info.Failed++
				x.state.mu.Unlock()
			}
			if !outcome.Rerun() {
				break
			}
			x.state.mu.Lock()
			x.state.info.Preempted++
			x.state.mu.Unlock()
			if err := x.waitForGates(ctx); err != nil {
				return err
			}
		}
		x.state.mu.Lock()
		x.state.info.Done++
		n := x.state.info.Done - doneAtStart
		if el := time.Since(started); n > 0 {
			x.state.info.RatePerMin = float64(n) / el.Minutes()
			est.observe(t.Key.Arm, time.Since(began))
			x.state.info.ETA = est.left(remaining(plan, i, counted)).Round(time.Second).String()
		}
		x.state.mu.Unlock()
		if x.mon != nil {
			if err := x.checkStop(ctx, plan, i, nil); errors.Is(err, ErrStoppedEarly) {
				return x.stopEarly(ctx, err)
			} else if err != nil {
				return err
			}
		}
	}
	// The judge phase starts its own arm, in its own reservation.
	x.release(ctx)
	return x.judge(ctx)
}

func (x *trialRunner) waitForGates(ctx context.Context) error {
	for {
		if x.env.Gates == nil {
			return fmt.Errorf("%w: no governor is wired", ErrGate)
		}
		if err := x.env.Gates.Ready(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (x *trialRunner) startArm(ctx context.Context, arm studies.Arm) (runtimes.Runtime, error) {
	fa, ok := x.snap.Arm(arm.Name)
	if !ok {
		return nil, fmt.Errorf("arm %s is not in the snapshot", arm.Name)
	}
	kind, frozen := x.snap.ArmRuntime(arm)
	build, err := runtimes.BuildOf(x.installed, kind)
	if err != nil {
		return nil, err
	}
	if frozen != "" && frozen != build.BinarySHA256 {
		return nil, &studies.StaleAssetError{Asset: kind + " binary " + build.Binary, Want: frozen, Got: build.BinarySHA256}
	}
	cfg := runtimes.Config{Model: fa.ModelPath, ModelName: arm.Model.RegistryName, ModelSHA256: fa.ModelSHA256,
		Context: arm.Pins.Context, WorkDir: filepath.Join(x.workDir, "rt-"+arm.Name), NoSandbox: x.env.NoSandbox,
		Offload: arm.Pins.Offload}
	card := studies.CardOf(x.design, arm)
	switch {
	case !card.Simulated || card.MemoryMiB <= 0:
	case arm.Pins.Offload.OnCard():
		// A smaller card simulated on the real one: the runtime is told its
		// size where it can be, and the governor holds the trial to it.
		cfg.CardBudget = studies.CardBytes(x.design, arm)
	default:
		// Each start gets a fresh reservation, made before the runtime
		// starts so its whole process tree is inside the card; its peak and
		// OOM counters then belong to this arm alone.
		res, err := cgroup.Reserve(ctx, uint64(preflight.Size(card.MemoryMiB)*preflight.MiB))
		if err != nil && !errors.Is(err, cgroup.ErrNoCgroup) {
			return nil, err
		}
		if res != nil {
			x.res = res
			cfg.CgroupDir = res.Dir()
		} else {
			x.env.Log.Warn("no writable memory cgroup: the simulated card is not enforced", "arm", arm.Name, "card", card.Name)
		}
	}
	return x.env.launch(ctx, build, cfg)
}

// stopArm stops a runtime (nil is fine) and removes its card reservation.
func (x *trialRunner) stopArm(ctx context.Context, rt runtimes.Runtime) {
	if rt != nil {
		rt.Stop(ctx)
	}
	if x.res != nil {
		if err := x.res.Close(); err != nil {
			x.env.Log.Error("removing a card reservation", "cgroup", x.res.Dir(), "err", err)
		}
		x.res = nil
	}
}

func (x *execution) writer(arm string, rp runtimes.Pins) (*genrecord.Writer, error) {
	if w, ok := x.writers[arm]; ok {
		return w, nil
	}
	w, err := genrecord.OpenWriter(x.records().Generation(arm), callrow.Pins(rp, x.snap.DesignHash, x.study, x.exec.ID))
	if err != nil {
		return nil, err
	}
	x.writers[arm] = w
	return w, nil
}

// runTrial runs one attempt of a trial under the governor's watch and stores
// its receipt. Only an error that makes the execution unsafe to continue is
// returned; a preempted or failed attempt is a receipt.
func (x *trialRunner) runTrial(ctx context.Context, sink Sink, arm studies.Arm, rt runtimes.Runtime, key studies.TrialKey) (receipts.Outcome, error) {
	rk := receiptTrial(key)
	attempt, parent, err := sink.NextAttempt(ctx, rk)
	if err != nil {
		return "", err
	}
	bank := x.banks[key.JobKind]
	task, ok := bank.Task(key.Task)
	if !ok {
		return "", fmt.Errorf("task %s is not in bank %s", key.Task, bank.File)
	}
	rp := rt.Pins()
	rec := x.newReceipt(arm, key, attempt, parent, rp)
	if studies.HarnessOf(arm.Runtime) == "aider" {
		// The caps bound what the harness may do, so they belong with the pins.
		c := x.harnessCaps(key.JobKind)
		rec.Pins["harness_caps"] = studies.DescribeCaps(c)
		if w, ok := x.walls[key.JobKind]; ok {
			rec.Pins["harness_caps"] += fmt.Sprintf(" (auto: %.0f× the worst case %s of %s, measured on this machine)", w.Margin, w.WorstCase.Round(time.Second), w.Slowest)
		}
		if len(task.Input.TestCommand) > 0 {
			// Aider runs the task's tests after each edit: what its test-fix turns see.
			rec.Pins["harness_auto_test"] = runtimes.ShellJoin(task.Input.TestCommand)
		}
	}
	callID := fmt.Sprintf("%s#%d", key, attempt)
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if x.env.Gates == nil {
		return "", fmt.Errorf("%w: no governor is wired", ErrGate)
	}
	guard, err := x.env.Gates.Watch(tctx, callID, rt.Sandbox(), studies.CardBytes(x.design, arm))
	if err != nil {
		// The queue is held: nothing ran, nothing is recorded; wait and retry.
		if werr := x.waitForGates(ctx); werr != nil {
			return "", werr
		}
		if guard, err = x.env.Gates.Watch(tctx, callID, rt.Sandbox(), studies.CardBytes(x.design, arm)); err != nil {
			return "", err
		}
	}
	go func() {
		select {
		case <-guard.Preempted():
			cancel()
		case <-tctx.Done():
		}
	}()
	if x.res != nil {
		x.res.ResetPeak()
	}
	start := time.Now()
	out, genErr := x.generate(tctx, arm, rt, key.JobKind, bank, task, callID)
	if out.files != nil {
		if err := KeepRepo(sink.Records(), callID, out.files); err != nil {
			return "", fmt.Errorf("keeping the repository of %s: %w", callID, err)
		}
	}
	rec.WallMS = time.Since(start).Milliseconds()
	rec.FinishedAt = time.Now().UTC()
	preempted := guard.End()
	if em, ok := guard.(EnergyMeter); ok && arm.Pins.Offload.OnCard() {
		if j, ok := em.TrialEnergy(); ok {
			rec.EnergyJoules, rec.EnergySource = j, receipts.EnergyMeasuredNVML
		}
	}
	if out.version != "" {
		rec.HarnessVersion = out.version
	}
	if out.aider != nil && out.aider.Containment.Sandboxed {
		// Aider ran in a sandbox of its own: its confinement is evidence too.
		rec.Pins["aider_containment"] = out.aider.Containment.Confinement.Summary()
	}
	var promptTok, outTok int
	var promptDur, outDur time.Duration
	for _, c := range out.calls {
		promptTok, promptDur = promptTok+c.Timings.PromptTokens, promptDur+c.Timings.PromptDuration
		outTok, outDur = outTok+c.Timings.OutputTokens, outDur+c.Timings.OutputDuration
		rec.InputTokens += c.PromptTokens
		rec.ThinkingTokens += c.ThinkingTokens
		rec.OutputTokens += c.OutputTokens
		rec.Truncated = rec.Truncated || c.Truncated
		rec.StopReason = c.StopReason
		rec.PeakMemoryBytes = max(rec.PeakMemoryBytes, c.PeakMemory)
		rec.Effort = receipts.Effort{RawParameter: c.Effort.Raw, Value: c.Effort.Label, Graded: c.Effort.Graded}
	}
	if promptDur > 0 {
		rec.PromptPerSecond = float64(promptTok) / promptDur.Seconds()
	}
	if outDur > 0 {
		rec.OutputPerSecond = float64(outTok) / outDur.Seconds()
	}
	if len(out.calls) > 0 && out.calls[0].Timings.PromptDuration > 0 {
		rec.TTFTMS = durMS(out.calls[0].Timings.PromptDuration)
	}
	if outTok > 0 && outDur > 0 {
		rec.TPOTMS = durMS(outDur) / float64(outTok)
	}
	if rec.Effort.Value == "" {
		rec.Effort = receipts.Effort{RawParameter: arm.Pins.Effort.RawParameter, Value: arm.Pins.Effort.Value, Graded: false}
	}
	switch {
	case preempted != "":
		rec.Outcome = receipts.Preempted
		rec.Detail = "preempted by the governor: " + preempted
	case genErr != nil && x.res != nil && x.oomKilled():
		rec.Outcome = receipts.FailedAtCard
		rec.Detail = fmt.Sprintf("blew the %d MiB card's memory budget (killed by the kernel's OOM killer): %v", studies.CardOf(x.design, arm).MemoryMiB, studies.FirstLine(genErr.Error()))
		rec.Grade = &receipts.Grade{Score: 0, Pass: false, Grader: "budget", GraderVersion: "1"}
	case genErr != nil && errors.Is(genErr, runtimes.ErrCrashed):
		rec.Outcome = receipts.Preempted
		rec.Detail = "runtime crashed mid-call (never scored against the model; rerun): " + studies.FirstLine(genErr.Error())
	case genErr != nil && ctx.Err() != nil:
		return "", ctx.Err()
	case genErr == nil && out.aider != nil && len(out.aider.CallErrors) > 0:
		// The arm failed a call the harness made: what the harness did
		// next was not the model's doing, so the trial is not scored.
		rec.Outcome = receipts.Error
		rec.Detail = "the arm did not answer a call the harness made, so the trial is not scored (rig study rerun retries it): " + strings.Join(out.aider.CallErrors, "; ")
	case genErr != nil:
		// One trial's failure (a prompt the runtime refuses, a harness that
		// would not start) is that trial's receipt: the execution goes on,
		// and the report names the task that produced no output.
		rec.Outcome = receipts.Error
		rec.Detail = "the trial failed and is not scored (rig study rerun retries it): " + studies.FirstLine(genErr.Error())
	}
	if rec.Outcome == "" {
		g, err := x.graders.Grade(ctx, task, tasks.Output{TrialID: callID, TaskID: task.ID, Text: out.text, Files: out.files})
		switch {
		case err != nil && ctx.Err() != nil:
			return "", ctx.Err()
		case err != nil:
			rec.Outcome = receipts.Error
			rec.Detail = "grading failed, so the trial is not scored (rig study rerun retries it): " + studies.FirstLine(err.Error())
		default:
			rec.Grade = &receipts.Grade{Score: g.Score, Pass: g.Pass, Grader: g.Grader, GraderVersion: strconv.Itoa(g.Version)}
			rec.Outcome = receipts.Scored
			if out.capped {
				rec.Outcome = receipts.Capped
				rec.Detail = "capped: " + out.capHit
			}
		}
		if out.aider != nil {
			rec.Detail = strings.TrimSpace(rec.Detail + " aider: " + out.aider.Describe())
		}
	}
	if len(out.calls) > 0 {
		w, err := sink.Writer(arm.Name, rp)
		if err != nil {
			return "", err
		}
		role := genrecord.RoleCandidate
		if out.harness == "aider" {
			role = genrecord.RoleAider
		}
		for i, c := range out.calls {
			if c.CallID == "" || out.harness == "aider" {
				c.CallID = fmt.Sprintf("%s/call-%d", callID, i+1)
			}
			if err := w.Append(generationRow(c.CallID, arm.Name, role, arm.Pins, x.topK, c)); err != nil {
				return "", err
			}
		}
		rec.GenerationSHA256 = w.Sum()
	}
	if rec.Outcome.Counted() && rec.GenerationSHA256 == "" {
		// A harness that made no model call still needs evidence of that.
		rec.GenerationSHA256 = genrecord.EmptySum
		rec.Detail = strings.TrimSpace(rec.Detail + " (no model call was made)")
	}
	if err := sink.PutReceipt(ctx, rec); err != nil {
		return "", err
	}
	return rec.Outcome, nil
}

func (x *trialRunner) oomKilled() bool {
	o, err := x.res.OOM()
	return err == nil && o.Kills > 0
}

func (x *execution) finish(err error) {
	// The execution's own context may be cancelled (that is how it ended):
	// its end is recorded under a context of its own, bounded so that a
	// stuck store cannot hold the handle's Done forever.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	status, kind, why := receipts.Done, studies.EventFinish, "all planned trials have a counted receipt"
	x.state.mu.Lock()
	failed := x.state.info.Failed
	x.state.mu.Unlock()
	if failed > 0 {
		why = fmt.Sprintf("every planned trial ran; %d ended in error and are not scored (the report names them; rig study rerun %s retries them)", failed, x.study)
	}
	if x.mon != nil && (err == nil || errors.Is(err, ErrStoppedEarly)) {
		seq := x.mon.sequential(err != nil, x.notRun)
		if err != nil {
			status, why, err = receipts.StoppedEarly, DescribeStop(seq), nil
		} else {
			why += "; " + DescribeStop(seq)
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		status, kind, why = receipts.Cancelled, studies.EventCancel, "cancelled"
	case err != nil:
		status, kind, why = receipts.Failed, studies.EventCancel, "failed: "+err.Error()
	}
	if e := x.store.SetExecutionStatus(ctx, x.exec.ID, receipts.Running, status, "rig daemon", why); e != nil {
		x.env.Log.Error("recording execution status", "err", e)
	}
	if x.ended != nil {
		x.ended(ctx, kind, why)
	}
	x.state.mu.Lock()
	x.state.info.Status = string(status)
	x.state.info.Current = ""
	if err != nil {
		x.state.info.Error = err.Error()
	}
	x.state.mu.Unlock()
	x.env.Log.Info("execution ended", "study", x.study, "execution", x.exec.ID, "status", status, "err", err)
}

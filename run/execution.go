package run

// One execution on this machine: the plan's trials in order (loop), the
// card sub-study's plan (cardPlan), the progress a Handle shows and the
// execution's end (finish). Each trial is trial.go's.

import (
	"context"
	"errors"
	"fmt"
	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/layout"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
	"time"
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
	// say, when set, is told what the execution does now, beside its
	// Handle's progress (showCurrent); trialsElsewhere marks an execution
	// whose trials ran on other machines (MergedFidelity).
	say             func(current string)
	trialsElsewhere bool
}

// records is the execution's folder as the layout names its files.
func (x *execution) records() layout.Records { return layout.Records(x.recDir) }

// loop runs every planned trial that has no counted receipt yet.
func (x *execution) loop(ctx context.Context) error {
	plan, counted, err := x.startLoop(ctx)
	if err != nil {
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
	for i := 0; i < len(plan.Trials); i++ {
		t := plan.Trials[i]
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
		if arm := x.design.Arm(t.Key.Arm); arm != nil && arm.Pins.SlotCount() > 1 {
			// The arm's stretch of the block goes out together (inflight.go).
			hi := stretchEnd(plan, i)
			if err := x.stretch(ctx, plan, i, hi, counted, est, x.rateSince(started, doneAtStart)); errors.Is(err, ErrStoppedEarly) {
				return x.stopEarly(ctx, err)
			} else if err != nil {
				return err
			}
			i = hi - 1
			continue
		}
		began := time.Now()
		if err := x.runUntilCounted(ctx, sink, t.Key); err != nil {
			return err
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
	// The judge phase starts its own arm, in its own reservation; the
	// fidelity step follows it (fidelity.go).
	x.release(ctx)
	return x.afterTrials(ctx)
}

// startLoop reads the execution's plan and what is counted already, keeps
// the plan, recovers preemptions left by a daemon that died, and sets up
// the progress and the stopping rule's monitor.
func (x *execution) startLoop(ctx context.Context) (*studies.Plan, map[receipts.TrialKey]receipts.Receipt, error) {
	plan, err := PlanOf(x.design, x.snap, x.exec)
	if err != nil {
		return plan, nil, err
	}
	if err := x.cardPlan(ctx, plan); err != nil {
		return plan, nil, err
	}
	if err := KeepPlan(x.records(), plan); err != nil {
		return plan, nil, err
	}
	if err := x.recoverPreemptions(ctx); err != nil {
		return plan, nil, err
	}
	counted, err := x.store.Counted(ctx, x.exec.ID)
	if err != nil {
		return plan, nil, err
	}
	x.state.mu.Lock()
	x.state.info.Planned = len(plan.Trials)
	x.state.info.Done = len(counted)
	x.state.mu.Unlock()
	if x.mon, err = newMonitor(x.design, plan); err != nil {
		return plan, nil, err
	}
	return plan, counted, nil
}

// rateSince is the progress update of a stretch of trials in flight: the
// trials counted per minute since this run of the loop started.
func (x *execution) rateSince(started time.Time, doneAtStart int) func() {
	return func() {
		x.state.mu.Lock()
		if n, el := x.state.info.Done-doneAtStart, time.Since(started); n > 0 {
			x.state.info.RatePerMin = float64(n) / el.Minutes()
		}
		x.state.mu.Unlock()
	}
}

// runUntilCounted runs one trial until it has an attempt that counts: a
// preempted attempt is rerun once the gates let it, each attempt with its
// own receipt.
func (x *execution) runUntilCounted(ctx context.Context, sink storeSink, key studies.TrialKey) error {
	for {
		x.state.mu.Lock()
		x.state.info.Current = key.String()
		x.state.mu.Unlock()
		outcome, err := x.Trial(ctx, sink, key)
		if err != nil {
			return err
		}
		if outcome == receipts.Error {
			x.state.mu.Lock()
			x.state.info.Failed++
			x.state.mu.Unlock()
		}
		if !outcome.Rerun() {
			return nil
		}
		x.state.mu.Lock()
		x.state.info.Preempted++
		x.state.mu.Unlock()
		if err := x.waitForGates(ctx); err != nil {
			return err
		}
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

// cardPlan drops, in a card sub-study, the trials of cells the preflight
// says do not fit: they are decided before any run and never run at a
// smaller context. With confirm_doesnt_fit, each such cell keeps its first
// trial, run inside its reservation as evidence.
// A verdict it cannot read stops the execution: the cell might not fit.
func (x *execution) cardPlan(ctx context.Context, plan *studies.Plan) error {
	if !x.design.IsCardStudy() {
		return nil
	}
	verdicts, err := ReadCardVerdicts(ctx, x.store, x.design)
	if err != nil {
		return fmt.Errorf("%w (run: rig study check %s)", err, x.study)
	}
	kept := plan.Trials[:0:0]
	confirmed := map[string]bool{}
	for _, t := range plan.Trials {
		if v, ok := verdicts[t.Key.Arm]; ok && !v.Fits {
			if !x.design.ConfirmDoesntFit || confirmed[t.Key.Arm] {
				continue
			}
			confirmed[t.Key.Arm] = true
		}
		kept = append(kept, t)
	}
	plan.Trials = kept
	return nil
}

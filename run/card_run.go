package run

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"rig/genrecord"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
)

// newReceipt starts a trial's receipt from the arm and the runtime's pins.
func (x *trialRunner) newReceipt(arm studies.Arm, key studies.TrialKey, attempt, parent int, rp runtimes.Pins) receipts.Receipt {
	digest := rp.ModelSHA256
	if digest == "" {
		if fa, ok := x.snap.Arm(arm.Name); ok {
			digest = fa.ModelSHA256
		}
	}
	m := rp.Machine
	if m.Cores == 0 {
		// The runtime never started (the card was too small to load it).
		m = runtimes.ReadMachine()
	}
	return receipts.Receipt{
		SchemaVersion: receipts.SchemaVersion, StudyID: x.study, ExecutionID: x.exec.ID, DesignHash: x.snap.DesignHash,
		Arm: key.Arm, JobKind: key.JobKind, TaskID: key.Task, Repeat: key.Repeat, Attempt: attempt, ParentAttempt: parent,
		ModelName: arm.Model.RegistryName, ModelDigest: digest, Runtime: studies.BaseRuntime(arm.Runtime),
		Harness: studies.HarnessOf(arm.Runtime), HarnessVersion: cmp.Or(rp.RuntimeVersion, "not started"),
		Pins: x.pinMap(arm, rp), Machine: m.String(), NoSandbox: x.env.NoSandbox,
		StartedAt: time.Now().UTC(),
	}
}

// pinMap is the receipt's pins, with the card the trial ran at.
func (x *trialRunner) pinMap(arm studies.Arm, rp runtimes.Pins) map[string]string {
	m := pinMap(arm, rp)
	card := studies.CardOf(x.design, arm)
	m["card"] = card.Name
	m["card_memory_mib"] = fmt.Sprint(card.MemoryMiB)
	m["card_simulated"] = fmt.Sprint(card.Simulated)
	if x.res != nil {
		m["card_cgroup"] = x.res.Name()
	}
	return m
}

// failedAtCard says whether a runtime that failed to start failed at the
// card: the kernel killed it for memory while it loaded the model inside
// the card's reservation, or it placed the model otherwise than its offload
// pin says (partly on the host). Either is recorded, never retried smaller.
func (x *trialRunner) failedAtCard(startErr error) bool {
	if startErr == nil {
		return false
	}
	return x.res != nil && x.oomKilled() || errors.Is(startErr, runtimes.ErrOffloadNotHeld)
}

// recordFailedAtCard stores the receipt of a trial whose runtime failed at
// the card (failedAtCard).
func (x *trialRunner) recordFailedAtCard(ctx context.Context, sink Sink, arm studies.Arm, key studies.TrialKey, startErr error) (receipts.Outcome, error) {
	attempt, parent, err := sink.NextAttempt(ctx, receiptTrial(key))
	if err != nil {
		return "", err
	}
	rec := x.newReceipt(arm, key, attempt, parent, runtimes.Pins{})
	rec.FinishedAt = time.Now().UTC()
	rec.Outcome = receipts.FailedAtCard
	if errors.Is(startErr, runtimes.ErrOffloadNotHeld) {
		rec.Detail = fmt.Sprintf("doesn't fit at this card: the runtime did not hold the offload pin (never run as a partial offload): %s", studies.FirstLine(startErr.Error()))
	} else {
		rec.Detail = fmt.Sprintf("blew the %d MiB card's memory budget while loading the model (killed by the kernel's OOM killer; never retried at a smaller context): %s",
			studies.CardOf(x.design, arm).MemoryMiB, studies.FirstLine(startErr.Error()))
	}
	if x.res != nil {
		if p, err := x.res.Peak(); err == nil {
			rec.PeakMemoryBytes = int64(p)
		}
	}
	rec.Grade = &receipts.Grade{Score: 0, Pass: false, Grader: "budget", GraderVersion: "1"}
	rec.GenerationSHA256 = genrecord.EmptySum
	if err := sink.PutReceipt(ctx, rec); err != nil {
		return "", err
	}
	return rec.Outcome, nil
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

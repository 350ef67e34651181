package studies

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"rig/preflight"
	"rig/receipts"
	"rig/runtimes"
)

// newReceipt starts a trial's receipt from the arm and the runtime's pins.
func (x *execution) newReceipt(arm Arm, key TrialKey, attempt, parent int, rp runtimes.Pins) receipts.Receipt {
	digest := rp.ModelSHA256
	if digest == "" {
		if fa, ok := x.frozenArm(arm.Name); ok {
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
		ModelName: arm.Model.RegistryName, ModelDigest: digest, Runtime: baseRuntime(arm.Runtime),
		Harness: harnessOf(arm.Runtime), HarnessVersion: orDefault(rp.RuntimeVersion, "not started"),
		Pins: x.pinMap(arm, rp), Machine: m.String(), NoSandbox: x.svc.NoSandbox,
		StartedAt: time.Now().UTC(),
	}
}

// pinMap is the receipt's pins, with the card the trial ran at.
func (x *execution) pinMap(arm Arm, rp runtimes.Pins) map[string]string {
	m := pinMap(arm, rp)
	card := cardOf(x.design, arm)
	m["card"] = card.Name
	m["card_memory_mib"] = fmt.Sprint(card.MemoryMiB)
	m["card_simulated"] = fmt.Sprint(card.Simulated)
	if x.res != nil {
		m["card_cgroup"] = x.res.Name()
	}
	return m
}

// recordFailedAtCard stores the receipt of a trial whose runtime the kernel
// killed for memory while it loaded the model inside the card's reservation.
func (x *execution) recordFailedAtCard(ctx context.Context, arm Arm, key TrialKey, startErr error) (receipts.Outcome, error) {
	attempt, parent, err := x.store.NextAttempt(ctx, x.exec.ID, receiptTrial(key))
	if err != nil {
		return "", err
	}
	rec := x.newReceipt(arm, key, attempt, parent, runtimes.Pins{})
	rec.FinishedAt = time.Now().UTC()
	rec.Outcome = receipts.FailedAtCard
	rec.Detail = fmt.Sprintf("blew the %d MiB card's memory budget while loading the model (killed by the kernel's OOM killer; never retried at a smaller context): %s",
		cardOf(x.design, arm).MemoryMiB, firstLine(startErr.Error()))
	if p, err := x.res.Peak(); err == nil {
		rec.PeakMemoryBytes = int64(p)
	}
	rec.Grade = &receipts.Grade{Score: 0, Pass: false, Grader: "budget", GraderVersion: "1"}
	rec.GenerationSHA256 = emptyRecordSum
	if err := x.store.PutReceipt(ctx, rec); err != nil {
		return "", err
	}
	return rec.Outcome, nil
}

// cardVerdicts reads the stored preflight verdict of every arm at its card.
// An arm without one is absent.
func cardVerdicts(ctx context.Context, st *receipts.Store, d *Design) map[string]preflight.Verdict {
	out := map[string]preflight.Verdict{}
	for _, a := range d.Arms {
		raw, err := st.Preflight(ctx, a.Name, cardProfile(d, a).Name)
		if err != nil || raw == nil {
			continue
		}
		var v preflight.Verdict
		if json.Unmarshal(raw, &v) == nil {
			out[a.Name] = v
		}
	}
	return out
}

// cardPlan drops, in a card sub-study, the trials of cells the preflight
// says do not fit: they are decided before any run and never run at a
// smaller context. With confirm_doesnt_fit, each such cell keeps its first
// trial, run inside its reservation as evidence.
func (x *execution) cardPlan(ctx context.Context, plan *Plan) {
	if !x.design.IsCardStudy() {
		return
	}
	verdicts := cardVerdicts(ctx, x.store, x.design)
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
}

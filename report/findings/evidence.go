package findings

import (
	"strings"

	"rig/analysis"
	"rig/genrecord"
	"rig/preflight"
	"rig/receipts"
	"rig/studies"
)

// Evidence is what a study stored about one execution, read once by the
// caller: the snapshot and its design, the plan, the receipts and grades,
// a card sub-study's preflight verdicts, what the generation records kept
// and the early-stopping record. Input and ReportData read only this.
type Evidence struct {
	Study     string
	Execution string
	Snapshot  *studies.Snapshot
	Design    *studies.Design
	// Plan is the execution's plan, nil when it could not be read (then no
	// trial is reported missing for want of a receipt).
	Plan     *studies.Plan
	Receipts []receipts.Receipt
	// Grades are the execution's stored grades; needed only when a judge
	// grades a job kind.
	Grades []receipts.GradeRecord
	// Verdicts are, in a card sub-study, the stored preflight verdicts by
	// arm; nil in a comparison study.
	Verdicts map[string]preflight.Verdict
	// Kept is what the execution's generation records hold.
	Kept Kept
	// Sequential is the execution's early-stopping record, nil when its
	// design has no stopping rule.
	Sequential *analysis.Sequential
	// Fidelity is what the execution's fidelity records give, computed by
	// ComputeFidelity; nil when it kept none (no job kind names a
	// reference arm).
	Fidelity *Fidelity
}

// Kept is what an execution's generation records add to its receipts: the
// kept text of each arm's task, and the trials whose kept call repeats its
// prompt. Fill it with Add, one row at a time, in file order.
type Kept struct {
	// Outputs is, by arm, job kind and task (Repeat left 0: every repeat),
	// the text of the first row kept for it.
	Outputs map[studies.TrialKey]string
	// Echoes are the trials whose candidate call repeats its rendered prompt
	// instead of answering it (analysis.EchoesPrompt); they shape the
	// stop-cap warning. A harness's calls and a judge's are not read.
	Echoes map[studies.TrialKey]bool
}

// Add reads one generation row. A row whose prompt names no trial key
// ("arm/job kind/task/repeat#attempt", as the runner writes it) is passed
// over: the report's sample and echo checks are best effort, the record's
// own check is rig study check's.
func (k *Kept) Add(r genrecord.Row) {
	id, _, _ := strings.Cut(r.Prompt, "#") // the trial key, without the attempt
	key, err := studies.ParseTrialKey(id)
	if err != nil {
		return
	}
	if k.Outputs == nil {
		k.Outputs, k.Echoes = map[studies.TrialKey]string{}, map[studies.TrialKey]bool{}
	}
	task := studies.TrialKey{Arm: key.Arm, JobKind: key.JobKind, Task: key.Task}
	if _, ok := k.Outputs[task]; !ok {
		k.Outputs[task] = r.Text
	}
	if r.Role == genrecord.RoleCandidate && analysis.EchoesPrompt(r.RenderedPrompt, r.Text) {
		k.Echoes[key] = true
	}
}

// Input is what the analysis reads of the evidence. A card sub-study's
// cells the preflight says do not fit are left out: not ranked.
func Input(ev *Evidence) analysis.Input {
	trials := judgedTrials(ev.Design, ev.Grades, Trials(ev.Receipts, notRunPlan(ev.Plan, ev.Sequential), ev.Snapshot.DesignHash, receiptMetrics(ev.Design)...))
	for i, t := range trials {
		trials[i].RepeatsPrompt = ev.Kept.Echoes[studies.TrialKey{Arm: t.Arm, JobKind: t.JobKind, Task: t.Task, Repeat: t.Repeat}]
	}
	ai := withoutCells(analysis.Input{Design: Design(ev.Design, ev.Snapshot.DesignHash), Trials: trials, Sequential: ev.Sequential}, doesntFit(ev.Design, ev.Verdicts))
	judgeIDs(&ai.Design, ev.Design, ev.Snapshot)
	if ev.Fidelity != nil {
		ai.Fidelity = ev.Fidelity.Deltas
	}
	return ai
}

// trialOf is a receipt's trial key. receipts.TrialKey, the store's key,
// leaves out the job kind (a task id is unique within a study's store).
func trialOf(r receipts.Receipt) studies.TrialKey {
	return studies.TrialKey{Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat}
}

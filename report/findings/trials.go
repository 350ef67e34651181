package findings

import (
	"cmp"
	"encoding/json"
	"strconv"

	"rig/analysis"
	"rig/receipts"
	"rig/studies"
)

// Trials maps receipts (every attempt, in key order) and the plan, if read,
// onto the analysis's trials. A trial whose only receipts are errors is one
// missing trial with the latest error as its reason; an error a later
// attempt replaced is left out of scoring (preempted); a planned trial with
// no counted receipt is missing. metrics are the receipt fields the design's
// guardrails name.
func Trials(recs []receipts.Receipt, plan *studies.Plan, designHash string, metrics ...string) []analysis.Trial {
	counted := map[studies.TrialKey]bool{}
	for _, r := range recs {
		if r.Outcome.Counted() {
			counted[trialOf(r)] = true
		}
	}
	var out []analysis.Trial
	failed := map[studies.TrialKey]int{} // the index in out of the trial's missing entry
	for _, r := range recs {
		k := trialOf(r)
		if r.Outcome == receipts.Error && !counted[k] {
			reason := "error: " + cmp.Or(studies.FirstLine(r.Detail), "no detail recorded")
			if i, ok := failed[k]; ok {
				out[i].Reason = reason // the latest attempt's reason
				continue
			}
			failed[k] = len(out)
			out = append(out, analysis.Trial{DesignHash: r.DesignHash, Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat, Missing: true, Reason: reason})
			continue
		}
		t := analysis.Trial{DesignHash: r.DesignHash, Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat,
			WallSeconds: float64(r.WallMS) / 1000, PeakMemoryBytes: r.PeakMemoryBytes,
			// No power meter on a CPU-only machine: energy is wall time at the
			// package's nominal draw, labelled as an estimate.
			EnergyJoules: float64(r.WallMS) / 1000 * studies.EstimatedWatts, EnergySource: analysis.EnergyEstimate,
			PromptTokS: r.PromptPerSecond, GenTokS: r.OutputPerSecond, TTFTMS: r.TTFTMS, TPOTMS: r.TPOTMS,
			Metrics: metricsOf(r, metrics)}
		if r.EnergySource == receipts.EnergyMeasuredNVML {
			// The card's counter measured this trial: the estimate stays
			// only where no counter exists.
			t.EnergyJoules, t.EnergySource = r.EnergyJoules, analysis.EnergyNVML
		}
		switch r.Outcome {
		case receipts.Preempted, receipts.Error:
			t.Preempted = true
		case receipts.FailedAtCard:
			t.BudgetBlown = true
		case receipts.Capped:
			t.Capped = true
		}
		if r.Truncated && r.Outcome.Counted() {
			t.Truncated = true
			t.StopCap, _ = strconv.Atoi(r.Pins["stop_cap"])
		}
		if r.Grade != nil {
			t.Score, t.Pass = r.Grade.Score, r.Grade.Pass
		}
		placeInTime(&t, r)
		out = append(out, t)
	}
	if plan != nil {
		for _, p := range plan.Trials {
			if _, ok := failed[p.Key]; ok || counted[p.Key] {
				continue
			}
			out = append(out, analysis.Trial{DesignHash: designHash, Arm: p.Key.Arm, JobKind: p.Key.JobKind, Task: p.Key.Task, Repeat: p.Key.Repeat, Missing: true, Reason: "no counted receipt"})
		}
	}
	return out
}

// metricsOf reads the named numeric fields of a receipt as it is written
// (its JSON keys); a field the receipt lacks or that is not a number is
// left out, and the guardrail on it reads "not measured".
func metricsOf(r receipts.Receipt, fields []string) map[string]float64 {
	if len(fields) == 0 {
		return nil
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	out := map[string]float64{}
	for _, f := range fields {
		if v, ok := m[f].(float64); ok {
			out[f] = v
		}
	}
	return out
}

// judgedTrials puts the judge's grades (all, the execution's stored grades)
// in place of the task graders' for every job kind graded by a judge: the
// judge's score is the job kind's score. A counted trial the judge has not
// graded is missing (a warning, never a zero); one that blew its card budget
// keeps its failing grade.
func judgedTrials(d *studies.Design, all []receipts.GradeRecord, trials []analysis.Trial) []analysis.Trial {
	judgeOf := map[string]string{}
	for _, jk := range d.JobKinds {
		if jk.Grader.Name == studies.JudgeGrader {
			judgeOf[jk.Name] = studies.JudgeName(jk.Judge)
		}
	}
	if len(judgeOf) == 0 {
		return trials
	}
	version := strconv.Itoa(studies.JudgeGraderVersion)
	grade := map[studies.TrialKey]receipts.GradeRecord{}
	for _, g := range all {
		if judgeOf[g.JobKind] == g.Grader && g.GraderVersion == version {
			grade[studies.TrialKey{Arm: g.Arm, JobKind: g.JobKind, Task: g.TaskID, Repeat: g.Repeat}] = g
		}
	}
	for i := range trials {
		t := &trials[i]
		if judgeOf[t.JobKind] == "" || t.Missing || t.Preempted || t.BudgetBlown {
			continue
		}
		g, ok := grade[studies.TrialKey{Arm: t.Arm, JobKind: t.JobKind, Task: t.Task, Repeat: t.Repeat}]
		if !ok {
			t.Missing, t.Score, t.Pass = true, 0, false
			continue
		}
		t.Score, t.Pass = g.Score, g.Pass
	}
	return trials
}

// notRunPlan is the plan without the trials an early stop left unrun, so
// they are not reported missing: they were never meant to run.
func notRunPlan(plan *studies.Plan, seq *analysis.Sequential) *studies.Plan {
	if plan == nil || seq == nil || !seq.StoppedEarly {
		return plan
	}
	skip := map[string]bool{}
	for _, k := range seq.NotRun {
		skip[k] = true
	}
	p := *plan
	p.Trials = nil
	for _, t := range plan.Trials {
		if !skip[analysis.NotRunID(t.Key.Arm, t.Key.JobKind, t.Key.Task, t.Key.Repeat)] {
			p.Trials = append(p.Trials, t)
		}
	}
	return &p
}

// placeInTime puts on t what the analysis needs to charge trials that ran
// beside others on one runtime (analysis/load.go): its slots, when its own
// request began (the receipt's end less its wall time) and its tokens.
func placeInTime(t *analysis.Trial, r receipts.Receipt) {
	t.Slots, _ = strconv.Atoi(r.Pins["slots"])
	if r.WallMS > 0 && !r.FinishedAt.IsZero() {
		t.StartMS = r.FinishedAt.UnixMilli() - r.WallMS
	}
	t.Tokens, t.OutputTokens = r.InputTokens+r.ThinkingTokens+r.OutputTokens, r.ThinkingTokens+r.OutputTokens
}

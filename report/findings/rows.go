package findings

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"rig/analysis"
	"rig/receipts"
	"rig/report"
	"rig/studies"
	"rig/tasks"
)

// rowSources is what the rows matrix reads beyond the analysis: the
// execution's receipts by arm and task, its governor events, its kept
// outputs and its replay results by trial.
type rowSources struct {
	// receipts are every attempt of an arm's task, by arm, job kind and
	// task (Repeat left 0: every repeat).
	receipts map[studies.TrialKey][]receipts.Receipt
	events   []receipts.GovernorEvent
	outputs  map[studies.TrialKey]string              // as Kept.Outputs
	replay   map[studies.TrialKey]report.ReplayStatus // the trial's worst replay result
	tasks    map[kindTask]tasks.Task                  // the bank's task (category, tags)
}

// kindTask is one task of one job kind's bank.
type kindTask struct{ jobKind, task string }

func newRowSources(ev *Evidence, x Extras) rowSources {
	src := rowSources{receipts: map[studies.TrialKey][]receipts.Receipt{}, outputs: ev.Kept.Outputs, replay: replayByTrial(x.Replay), tasks: map[kindTask]tasks.Task{}}
	for kind, b := range x.Banks {
		for _, t := range b.Tasks {
			src.tasks[kindTask{kind, t.ID}] = t
		}
	}
	for _, r := range ev.Receipts {
		k := studies.TrialKey{Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID}
		src.receipts[k] = append(src.receipts[k], r)
	}
	for _, e := range x.Events {
		if e.ExecutionID == ev.Execution || e.ExecutionID == "" {
			src.events = append(src.events, e)
		}
	}
	return src
}

// kindRows fills a job kind's per-task values and its paired rows: one
// row per named pair and task, each side with its counted receipt.
func kindRows(jk *report.Kind, kt analysis.KindTasks, d analysis.Design, src rowSources) {
	sc := &report.Scores{Arms: kt.Arms, Tasks: kt.Tasks, Values: make([][]*float64, len(kt.Arms))}
	for a := range kt.Arms {
		sc.Values[a] = make([]*float64, len(kt.Tasks))
		for t, row := range kt.Values {
			if v := row[a]; !math.IsNaN(v) {
				sc.Values[a][t] = &v
			}
		}
	}
	jk.Scores = sc
	factor := cmp.Or(d.CostFactor, 1.5)
	for j, p := range jk.Pairs {
		if !slices.Contains(kt.Arms, p.Challenger) || !slices.Contains(kt.Arms, p.Baseline) {
			continue
		}
		for _, task := range kt.Tasks {
			b := src.side(p.Baseline, kt.JobKind, task, kt.Gate, jk.Measure == string(analysis.MeasureScore))
			c := src.side(p.Challenger, kt.JobKind, task, kt.Gate, jk.Measure == string(analysis.MeasureScore))
			row := report.Row{Pair: j, Task: task, Baseline: b, Challenger: c}
			if t, ok := src.tasks[kindTask{kt.JobKind, task}]; ok {
				row.Category = t.TemplateID
				row.Tags = slices.Clone(t.Tags)
				if t.Difficulty != "" {
					row.Tags = append(row.Tags, "difficulty:"+t.Difficulty)
				}
			}
			row.HighCost = b.Receipt != nil && c.Receipt != nil && b.Receipt.WallSeconds > 0 && c.Receipt.WallSeconds > factor*b.Receipt.WallSeconds
			jk.Rows = append(jk.Rows, row)
		}
	}
}

// side is one arm's side of a row: how its repeats went at the gate, the
// receipt of its first counted repeat (latest attempt), and its flags. A
// repeat passes as the analysis reads it: its pass, or its score at the
// gate when the job kind ranks on scores.
func (src rowSources) side(arm, kind, task string, gate float64, byScore bool) report.RowSide {
	at := studies.TrialKey{Arm: arm, JobKind: kind, Task: task}
	s := report.RowSide{Output: src.outputs[at]}
	recs := src.receipts[at]
	var shown *receipts.Receipt
	for i := range recs {
		r := &recs[i]
		switch r.Outcome {
		case receipts.Error:
			s.ToolError = true
		case receipts.Preempted:
			s.PolicyBlock = true
		}
		if !r.Outcome.Counted() {
			continue
		}
		s.Repeats++
		if r.Grade != nil && (!byScore && r.Grade.Pass || byScore && r.Grade.Score >= gate) {
			s.Passed++
		}
		if shown == nil || r.Repeat < shown.Repeat || (r.Repeat == shown.Repeat && r.Attempt > shown.Attempt) {
			shown = r
		}
	}
	if shown == nil {
		return s
	}
	trial := trialOf(*shown)
	key := trial.String()
	rr := &report.RowReceipt{Trial: key, Attempt: shown.Attempt, Outcome: string(shown.Outcome), Pins: shown.Pins,
		InputTokens: shown.InputTokens, OutputTokens: shown.OutputTokens, WallSeconds: float64(shown.WallMS) / 1000,
		PeakMemBytes: shown.PeakMemoryBytes, Detail: studies.FirstLine(shown.Detail)}
	for _, e := range src.events {
		// A governor event names the trial, or one attempt of it (#n).
		if e.Trial == key || strings.HasPrefix(e.Trial, key+"#") {
			rr.GovernorEvents = append(rr.GovernorEvents, e.Kind+" at "+e.At.UTC().Format("15:04:05")+" ("+e.Trial+")")
		}
	}
	s.Receipt = rr
	s.Replay = src.replay[trial]
	return s
}

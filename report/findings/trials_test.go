package findings

import (
	"slices"
	"strings"
	"testing"

	"rig/analysis"
	"rig/receipts"
	"rig/studies"
)

// TestReceiptTrials: a truncated receipt becomes a capped trial carrying its
// stop_cap pin; a trial whose only receipt is an error is one missing trial
// with the error as its reason (not a preempted one plus a missing one); an
// error a later attempt replaced is left out of scoring.
func TestReceiptTrials(t *testing.T) {
	rec := func(arm, task string, attempt int, o receipts.Outcome, truncated bool, detail string) receipts.Receipt {
		r := receipts.Receipt{DesignHash: "h", Arm: arm, JobKind: "qa", TaskID: task, Attempt: attempt, Outcome: o, Truncated: truncated, Detail: detail,
			Pins: map[string]string{"stop_cap": "48"}}
		if o.Counted() {
			r.Grade = &receipts.Grade{Pass: true, Score: 1}
		}
		return r
	}
	recs := []receipts.Receipt{
		rec("a", "t1", 1, receipts.Scored, true, ""),
		rec("a", "t2", 1, receipts.Error, false, "HTTP 400: prompt longer than context\nbody follows"),
		rec("b", "t1", 1, receipts.Error, false, "connection reset"),
		rec("b", "t1", 2, receipts.Scored, false, ""),
	}
	plan := &studies.Plan{Trials: []studies.Trial{{Key: studies.TrialKey{Arm: "a", JobKind: "qa", Task: "t1"}}, {Key: studies.TrialKey{Arm: "a", JobKind: "qa", Task: "t2"}},
		{Key: studies.TrialKey{Arm: "b", JobKind: "qa", Task: "t1"}}, {Key: studies.TrialKey{Arm: "b", JobKind: "qa", Task: "t2"}}}}
	got := Trials(recs, plan, "h")
	find := func(arm, task string) []analysis.Trial {
		var out []analysis.Trial
		for _, tr := range got {
			if tr.Arm == arm && tr.Task == task {
				out = append(out, tr)
			}
		}
		return out
	}
	if a1 := find("a", "t1"); len(a1) != 1 || !a1[0].Truncated || a1[0].StopCap != 48 || !a1[0].Pass || a1[0].Missing {
		t.Errorf("truncated receipt became %+v; want one scored trial, truncated at stop_cap 48", a1)
	}
	if a2 := find("a", "t2"); len(a2) != 1 || !a2[0].Missing || a2[0].Reason != "error: HTTP 400: prompt longer than context" {
		t.Errorf("errored trial became %+v; want one missing trial whose reason is the error's first line", a2)
	}
	b1 := find("b", "t1")
	if i := slices.IndexFunc(b1, func(tr analysis.Trial) bool { return tr.Missing }); i >= 0 || len(b1) != 2 || !b1[0].Preempted || b1[1].Preempted {
		t.Errorf("rerun error became %+v; want the error left out (preempted) and the rerun scored", b1)
	}
	if b2 := find("b", "t2"); len(b2) != 1 || !b2[0].Missing || b2[0].Reason != "no counted receipt" {
		t.Errorf("unrun trial became %+v; want one missing trial", b2)
	}
}

// TestFailureCountsNameTheError: an error with no counted rerun is counted
// under its reason; one that a rerun replaced is not a failure.
func TestFailureCountsNameTheError(t *testing.T) {
	recs := []receipts.Receipt{
		{Arm: "a", JobKind: "qa", TaskID: "t1", Outcome: receipts.Error, Detail: "HTTP 400: prompt longer than context"},
		{Arm: "a", JobKind: "qa", TaskID: "t2", Outcome: receipts.Error, Detail: "HTTP 400: prompt longer than context"},
		{Arm: "b", JobKind: "qa", TaskID: "t1", Attempt: 1, Outcome: receipts.Error, Detail: "connection reset"},
		{Arm: "b", JobKind: "qa", TaskID: "t1", Attempt: 2, Outcome: receipts.Scored, Grade: &receipts.Grade{Pass: true}},
		{Arm: "b", JobKind: "qa", TaskID: "t2", Outcome: receipts.Scored, Truncated: true, Grade: &receipts.Grade{Pass: false}},
	}
	var lines []string
	for _, f := range failureCounts(recs, "qa", nil) {
		lines = append(lines, f.Arm+": "+f.Code+" ×"+string(rune('0'+f.Count)))
	}
	slices.Sort(lines)
	want := "a: error: HTTP 400: prompt longer than context ×2\nb: failed: truncated at the stop cap ×1"
	if got := strings.Join(lines, "\n"); got != want {
		t.Errorf("failures:\n%s\nwant:\n%s", got, want)
	}
}

// TestAnalysisDesignKeepsEveryClause: every clause of decision_rule.clauses
// reaches the analysis under its own number, the two the analysis judges
// itself as checks, with the stated smallest difference for "underpowered".
func TestAnalysisDesignKeepsEveryClause(t *testing.T) {
	d := &studies.Design{
		Arms:     []studies.Arm{{Name: "inc", Role: studies.RoleIncumbent}, {Name: "ch", Role: studies.RoleCandidate}},
		JobKinds: []studies.JobKind{{Name: "qa", RankingMeasure: studies.Measure{Name: "pass_rate"}}},
		Power:    studies.Power{SmallestDetectableDifference: 0.3, PilotDiscordance: 0.4, TaskCount: 50},
		DecisionRule: studies.DecisionRule{Clauses: []studies.Clause{
			{When: studies.WhenUnderpowered, Assign: studies.OutcomeNoDecision}, {When: studies.WhenPBestBelowBar, Assign: studies.OutcomeKeepIncumbent},
			{When: studies.WhenChallengerCostMore, Assign: studies.OutcomeKeepIncumbent, MaxCostRatio: 2}, {When: studies.WhenChallengerBetter, Assign: "switch to the challenger"},
			{When: studies.WhenChallengerWorse, Assign: studies.OutcomeKeepIncumbent}, {When: studies.WhenNotShown, Assign: studies.OutcomeKeepIncumbent},
		}, Otherwise: studies.OutcomeKeepIncumbent},
	}
	ad := Design(d, "h")
	var got []string
	for _, c := range ad.Rule.Clauses {
		got = append(got, strings.TrimSpace(strings.Join([]string{string(rune('0' + c.Number)), c.When, c.Check, c.Then}, " ")))
	}
	want := []string{"1 underpowered underpowered no decision at this sample size", "2 p_best_below_bar p_best_below_bar keep the incumbent",
		"3 challenger_costs_more  keep the incumbent", "4 challenger_better  accept ch", "5 challenger_worse  keep the incumbent", "6 difference_not_shown  keep the incumbent"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("clauses:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ad.Power == nil || ad.Power.SmallestDifference != 0.3 {
		t.Errorf("power %+v; want the stated smallest difference 0.3", ad.Power)
	}
	in := analysis.Input{Design: ad}
	if err := in.Validate(); err != nil {
		t.Errorf("the mapped design does not validate: %v", err)
	}
}

package analysis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// threeArmInput has job kinds "apply" and "review"; "fast" improves on
// "base" in apply only, "slow" is the same as base everywhere.
func threeArmInput(rule Rule) Input {
	d := Design{
		Hash: "d3", Incumbent: "base", Seed: 11,
		Arms:     []Arm{{Name: "base"}, {Name: "fast"}, {Name: "slow"}},
		JobKinds: []JobKind{{Name: "apply", Measure: MeasurePass}, {Name: "review", Measure: MeasureScore}},
		Pairs:    []Pair{{Candidate: "fast", Baseline: "base"}, {Candidate: "slow", Baseline: "base"}},
		Rule:     rule,
	}
	rng := rand.New(rand.NewPCG(5, 5))
	var ts []Trial
	for t := range 300 {
		u, v := rng.Float64(), rng.Float64()
		for _, arm := range []string{"base", "fast", "slow"} {
			p := 0.4
			if arm == "fast" {
				p = 0.75
			}
			task := fmt.Sprintf("t%03d", t)
			ts = append(ts, Trial{DesignHash: "d3", Arm: arm, JobKind: "apply", Task: task, Pass: u < p, WallSeconds: 5})
			ts = append(ts, Trial{DesignHash: "d3", Arm: arm, JobKind: "review", Task: task, Score: v, WallSeconds: 5})
		}
	}
	return Input{Design: d, Trials: ts}
}

func TestRuleEvaluation(t *testing.T) {
	improve := func(c, kind string, min float64) Condition {
		return Condition{Outcomes: []Outcome{Improvement}, Candidate: c, Baseline: "base", JobKind: kind, MinDelta: min}
	}
	tests := []struct {
		name     string
		rule     Rule
		verdict  Verdict
		arm      string
		clause   int
		next     string
		traceHas []string
	}{
		{name: "first holding clause decides",
			rule:    Rule{Clauses: []Clause{{If: []Condition{improve("slow", "apply", 0)}, Then: "accept slow"}, {If: []Condition{improve("fast", "apply", 0.1)}, Then: "accept fast"}}},
			verdict: Accept, arm: "fast", clause: 2, next: "fast",
			traceHas: []string{"clause 1: if improvement on slow vs base in apply", "→ does not hold", "clause 2", "|delta| ≥ 0.1", "→ holds", "then: accept fast; next baseline: fast"}},
		{name: "every job kind must hold",
			rule:    Rule{Clauses: []Clause{{If: []Condition{improve("fast", "", 0)}, Then: "accept fast"}}, Default: "keep the incumbent"},
			verdict: Keep, clause: 0, next: "base",
			traceHas: []string{"in every job kind", "apply: improvement", "review: tie", "no clause holds: default", "then: keep the incumbent"}},
		{name: "a minimum delta larger than the lead fails",
			rule:    Rule{Clauses: []Clause{{If: []Condition{improve("fast", "apply", 0.9)}, Then: "accept fast"}}},
			verdict: Undecided, clause: 0, next: "base",
			traceHas: []string{"|delta| ≥ 0.9", "no decision at this sample size"}},
		{name: "accepting a non-winner goes to review",
			rule:    Rule{Clauses: []Clause{{If: []Condition{{Outcomes: []Outcome{Tie}, Candidate: "slow", Baseline: "base", JobKind: "apply"}}, Then: "accept slow"}}},
			verdict: NeedsReview, clause: 1, next: "base",
			traceHas: []string{`"accept slow" refused`, "then: needs_review"}},
		{name: "tie clause with two conditions",
			rule: Rule{Clauses: []Clause{{If: []Condition{
				{Outcomes: []Outcome{Tie}, Candidate: "slow", Baseline: "base", JobKind: "apply"},
				{Outcomes: []Outcome{Tie, Inconclusive}, Candidate: "slow", Baseline: "base", JobKind: "review"},
			}, Then: "reject slow"}}},
			verdict: Reject, arm: "slow", clause: 1, next: "base",
			traceHas: []string{"tie on slow vs base in apply", " and ", "tie or inconclusive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Analyse(context.Background(), threeArmInput(tc.rule))
			if err != nil {
				t.Fatal(err)
			}
			dec := r.Decision
			trace := strings.Join(dec.Trace, "\n")
			if dec.Verdict != tc.verdict || dec.Arm != tc.arm || dec.Clause != tc.clause || dec.NextBaseline != tc.next {
				t.Fatalf("decision %+v; want %s %q clause %d next %s\n%s", dec, tc.verdict, tc.arm, tc.clause, tc.next, trace)
			}
			for _, s := range tc.traceHas {
				if !strings.Contains(trace, s) {
					t.Errorf("trace lacks %q:\n%s", s, trace)
				}
			}
			if r.HolmFamily != 4 {
				t.Errorf("Holm family %d, want 2 pairs × 2 job kinds", r.HolmFamily)
			}
		})
	}
}

func TestParseAction(t *testing.T) {
	tests := []struct {
		in      string
		verdict Verdict
		arm     string
		ok      bool
	}{
		{"accept qwen3", Accept, "qwen3", true},
		{"Keep the incumbent", Keep, "", true},
		{"no decision at this sample size", Undecided, "", true},
		{"ship gemma", Ship, "gemma", true},
		{"hold", Hold, "", true},
		{"accept", "", "", false},
		{"promote qwen3", "", "", false},
	}
	for _, tc := range tests {
		v, arm, ok := parseAction(tc.in)
		if v != tc.verdict || arm != tc.arm || ok != tc.ok {
			t.Errorf("parseAction(%q) = %q %q %v", tc.in, v, arm, ok)
		}
	}
}

// writtenRule is the bundled demo's six clauses as studies maps them: two
// checks the analysis judges itself, then four pair clauses.
func writtenRule() Rule {
	pair := func(n int, when string, o []Outcome, then string) Clause {
		return Clause{Number: n, When: when, Then: then, If: []Condition{{Outcomes: o, Candidate: "cand", Baseline: "base"}}}
	}
	return Rule{Clauses: []Clause{
		{Number: 1, When: "underpowered", Check: CheckUnderpowered, Then: NoDecision},
		{Number: 2, When: "p_best_below_bar", Check: CheckPBestBelowBar, Then: "keep the incumbent"},
		pair(3, "challenger_costs_more", []Outcome{Tradeoff}, "keep the incumbent"),
		pair(4, "challenger_better", []Outcome{Improvement}, "accept cand"),
		pair(5, "challenger_worse", []Outcome{Regression}, "keep the incumbent"),
		pair(6, "difference_not_shown", []Outcome{Inconclusive, Tie}, "keep the incumbent"),
	}, Default: "keep the incumbent"}
}

// TestTraceShowsEveryWrittenClause: every clause the design wrote appears in
// the trace under its own number, the two analysis-judged checks say the
// figures that decided them, and the first holding clause decides.
func TestTraceShowsEveryWrittenClause(t *testing.T) {
	tests := []struct {
		name     string
		pass     map[string]float64
		smallest float64
		bar      float64
		verdict  Verdict
		clause   int
		traceHas []string
	}{
		{name: "underpowered decides first",
			pass: map[string]float64{"base": 0.3, "cand": 0.9}, smallest: 0.01, bar: 0.8, verdict: Undecided, clause: 1,
			traceHas: []string{"clause 1 (underpowered): if the task count cannot see the stated difference 0.01", "200 paired tasks (fewest, cand vs base in apply) detect a lead of", "> the stated 0.01] → holds",
				"clause 2 (p_best_below_bar): not reached, clause 1 decided first", "clause 6 (difference_not_shown): not reached"}},
		{name: "a clear winner passes both checks",
			pass: map[string]float64{"base": 0.3, "cand": 0.9}, smallest: 0.4, bar: 0.8, verdict: Accept, clause: 4,
			traceHas: []string{"≤ the stated 0.4] → does not hold", "clause 2 (p_best_below_bar): if the leader's P(best) is under the bar 0.8 in any job kind [apply: leader cand P(best) 1.000 ≥ 0.8: no] → does not hold",
				"clause 3 (challenger_costs_more): if tradeoff", "clause 4 (challenger_better): if improvement on cand vs base", "clause 5 (challenger_worse): not reached, clause 4 decided first", "clause 6 (difference_not_shown): not reached"}},
		{name: "P(best) under the bar keeps the incumbent",
			pass: map[string]float64{"base": 0.5, "cand": 0.52}, smallest: 0.4, bar: 1, verdict: Keep, clause: 2,
			traceHas: []string{"apply: leader cand P(best)", "< 1: yes] → holds", "clause 3 (challenger_costs_more): not reached, clause 2 decided first"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := twoArmDesign(MeasurePass)
			d.Rule, d.PBestBar = writtenRule(), tc.bar
			d.Power = &PowerPlan{PilotDiscordance: 0.5, Tasks: 200, SmallestDifference: tc.smallest}
			in := Input{Design: d, Trials: passTrials(3, 200, tc.pass, map[string]float64{"base": 5, "cand": 5})}
			r, err := Analyse(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			dec := r.Decision
			trace := strings.Join(dec.Trace, "\n")
			if dec.Verdict != tc.verdict || dec.Clause != tc.clause {
				t.Fatalf("decision %s by clause %d; want %s by clause %d\n%s", dec.Verdict, dec.Clause, tc.verdict, tc.clause, trace)
			}
			for n := 1; n <= 6; n++ {
				if c := strings.Count(trace, fmt.Sprintf("clause %d (", n)); c != 1 {
					t.Errorf("clause %d appears %d times in the trace, want once:\n%s", n, c, trace)
				}
			}
			for _, s := range tc.traceHas {
				if !strings.Contains(trace, s) {
					t.Errorf("trace lacks %q:\n%s", s, trace)
				}
			}
		})
	}
}

// A written clause that stands for one check per pair (the demo's three
// pairs) is listed once when it is not reached, as the design wrote it once.
func TestTraceListsAnUnreachedClauseOnce(t *testing.T) {
	d := twoArmDesign(MeasurePass)
	rule := writtenRule()
	var clauses []Clause
	for _, c := range rule.Clauses {
		clauses = append(clauses, c)
		if c.Number >= 3 {
			clauses = append(clauses, c, c) // as if three pairs shared the clause
		}
	}
	rule.Clauses = clauses
	d.Rule, d.PBestBar = rule, 0.8
	d.Power = &PowerPlan{PilotDiscordance: 0.5, Tasks: 200, SmallestDifference: 0.01}
	r, err := Analyse(context.Background(), Input{Design: d, Trials: passTrials(3, 200, map[string]float64{"base": 0.3, "cand": 0.9}, map[string]float64{"base": 5, "cand": 5})})
	if err != nil {
		t.Fatal(err)
	}
	trace := strings.Join(r.Decision.Trace, "\n")
	for n := 3; n <= 6; n++ {
		if c := strings.Count(trace, fmt.Sprintf("clause %d (", n)); c != 1 {
			t.Errorf("unreached clause %d listed %d times, want once:\n%s", n, c, trace)
		}
	}
}

// TestUnderpoweredSizesAStoppedStudyAtItsPlan: a study a stopping rule
// ended early on efficacy is sized at its planned tasks, not at the tasks
// it ran before the stop (the stopping time depends on the outcome the
// check gates). The stated difference is one the plan detects and the
// tasks before the stop do not, so the fixed-size reading says
// "underpowered" and the planned one does not.
func TestUnderpoweredSizesAStoppedStudyAtItsPlan(t *testing.T) {
	const planned, block = 60, 10
	all := passTrials(5, planned, map[string]float64{"base": 0.1, "cand": 0.9}, map[string]float64{"base": 5, "cand": 5})
	rule := Stopping{Method: GroupSequential, Spending: OBrienFleming, Alpha: 0.05}
	var paired []PairedTask
	for i := 0; i < len(all); i += 2 {
		paired = append(paired, PairedTask{Task: all[i].Task, Baseline: map[bool]float64{true: 1}[all[i].Pass], Candidate: map[bool]float64{true: 1}[all[i+1].Pass]})
	}
	var look Look
	var checks []int
	for n := block; n < planned; n += block {
		checks = append(checks, n)
		l, err := Monitor(MonitorState{Stopping: rule, Pairs: []MonitoredPair{{Pair: Pair{Candidate: "cand", Baseline: "base"}, JobKind: "apply", Measure: MeasurePass, Planned: planned, Tasks: paired[:n], Checks: checks}}})
		if err != nil {
			t.Fatal(err)
		}
		if look = l; l.Stop {
			break
		}
	}
	if !look.Stop {
		t.Fatalf("a 0.1 against 0.9 pass rate never crossed before the plan's end: %+v", look)
	}
	ran := checks[len(checks)-1]
	seq := &Sequential{Stopping: rule, Look: look, StoppedEarly: true}
	for _, tr := range all[2*ran:] {
		seq.NotRun = append(seq.NotRun, NotRunID(tr.Arm, tr.JobKind, tr.Task, 1))
	}
	at := func(n int) float64 {
		md, ok := MinDetectable(n, 0.5, 0.05, 0.8)
		if !ok {
			t.Fatalf("%d tasks detect no lead", n)
		}
		return md
	}
	d := twoArmDesign(MeasurePass)
	d.Rule, d.PBestBar = writtenRule(), 0.8
	smallest := (at(planned) + at(ran)) / 2 // detected by the plan, not by the tasks run
	d.Power = &PowerPlan{PilotDiscordance: 0.5, Tasks: planned, SmallestDifference: smallest}
	for _, tc := range []struct {
		name  string
		seq   *Sequential
		holds bool
		says  string
	}{
		{"stopped early: sized at the plan", seq, false, fmt.Sprintf("%d paired tasks (fewest, cand vs base in apply, as planned; %d paired before the early stop)", planned, ran)},
		{"the same tasks without a stopping rule", nil, true, fmt.Sprintf("%d paired tasks (fewest, cand vs base in apply)", ran)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Analyse(context.Background(), Input{Design: d, Trials: all[:2*ran], Sequential: tc.seq})
			if err != nil {
				t.Fatal(err)
			}
			var clause string
			for _, c := range r.Decision.Trace {
				if strings.HasPrefix(c, "clause 1 (underpowered)") {
					clause = c
				}
			}
			if strings.HasSuffix(clause, "→ holds") != tc.holds || !strings.Contains(clause, tc.says) {
				t.Fatalf("underpowered clause %q; want holds=%v and %q (decision %s)", clause, tc.holds, tc.says, r.Decision.Verdict)
			}
		})
	}
}

package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestOutcomes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		pass    map[string]float64
		wall    map[string]float64
		mutate  func(*Input)
		want    Outcome
		verdict Verdict
	}{
		{name: "clear improvement", pass: map[string]float64{"base": 0.4, "cand": 0.7}, wall: map[string]float64{"base": 10, "cand": 11}, want: Improvement, verdict: Accept},
		{name: "clear regression", pass: map[string]float64{"base": 0.7, "cand": 0.4}, wall: map[string]float64{"base": 10, "cand": 10}, want: Regression, verdict: Keep},
		{name: "better but three times the time", pass: map[string]float64{"base": 0.4, "cand": 0.7}, wall: map[string]float64{"base": 10, "cand": 30}, want: Tradeoff, verdict: Keep},
		{name: "worse but a third of the time", pass: map[string]float64{"base": 0.7, "cand": 0.4}, wall: map[string]float64{"base": 30, "cand": 10}, want: Tradeoff, verdict: Keep},
		{name: "identical on every task", pass: map[string]float64{"base": 0.5, "cand": 0.5}, wall: map[string]float64{"base": 10, "cand": 10}, want: Tie, verdict: Undecided},
		{name: "small difference not shown", pass: map[string]float64{"base": 0.5, "cand": 0.53}, wall: map[string]float64{"base": 10, "cand": 10}, want: Inconclusive, verdict: Undecided},
		{name: "missing paired data", pass: map[string]float64{"base": 0.4, "cand": 0.7}, wall: map[string]float64{"base": 10, "cand": 10},
			mutate: func(in *Input) { in.Trials[1].Missing = true }, want: Inconclusive, verdict: Undecided},
		{name: "different judges", pass: map[string]float64{"base": 0.4, "cand": 0.7}, wall: map[string]float64{"base": 10, "cand": 10},
			mutate: func(in *Input) { in.Design.Arms[1].JudgeID = "judge-v2" }, want: NotComparable, verdict: Undecided},
		{name: "different calibrations", pass: map[string]float64{"base": 0.4, "cand": 0.7}, wall: map[string]float64{"base": 10, "cand": 10},
			mutate: func(in *Input) { in.Design.Arms[0].CalibrationID = "cal-1" }, want: NotComparable, verdict: Undecided},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Design: twoArmDesign(MeasurePass), Trials: passTrials(7, 200, tc.pass, tc.wall)}
			if tc.mutate != nil {
				tc.mutate(&in)
			}
			r, err := Analyse(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			p := r.Pairs[0]
			if p.Outcome != tc.want {
				t.Fatalf("outcome %s (%s), want %s", p.Outcome, p.Reason, tc.want)
			}
			if r.Decision.Verdict != tc.verdict {
				t.Errorf("decision %s, want %s; trace:\n%s", r.Decision.Verdict, tc.verdict, strings.Join(r.Decision.Trace, "\n"))
			}
			if p.Outcome == Inconclusive && strings.Contains(p.Reason, "equal") && !strings.Contains(p.Reason, "not equal") {
				t.Errorf("an unshown difference must not read as equal: %s", p.Reason)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Errorf("report does not encode: %v", err)
			}
		})
	}
}

func TestTrialFlags(t *testing.T) {
	ctx := context.Background()
	d := twoArmDesign(MeasureScore)
	mk := func(arm, task string, rep int, score float64) Trial {
		return Trial{DesignHash: "d1", Arm: arm, JobKind: "apply", Task: task, Repeat: rep, Score: score}
	}
	trials := []Trial{
		mk("base", "a", 0, 0.2), mk("base", "a", 1, 0.4), // repeats average to 0.3
		mk("base", "b", 0, 1), mk("base", "c", 0, 0.5),
		mk("cand", "a", 0, 0.9), mk("cand", "b", 0, 0.8), mk("cand", "c", 0, 0.6),
	}
	pre := mk("base", "b", 1, 0) // preempted: never scored against the model
	pre.Preempted = true
	blown := mk("cand", "c", 1, 1) // blew its budget: a failure, whatever its score
	blown.BudgetBlown = true
	miss := mk("cand", "d", 0, 0) // the only trial of task d: missing, not zero
	miss.Missing = true
	capped := mk("cand", "b", 1, 0.8)
	capped.Capped = true
	trials = append(trials, pre, blown, miss, capped)
	r, err := Analyse(ctx, Input{Design: d, Trials: trials})
	if err != nil {
		t.Fatal(err)
	}
	k := r.Kinds[0]
	base, cand := k.Arms[0], k.Arms[1]
	if want := (0.3 + 1 + 0.5) / 3; math.Abs(float64(base.Mean)-want) > 1e-12 {
		t.Errorf("base mean %v, want %v (repeats averaged, preempted excluded)", base.Mean, want)
	}
	if want := (0.9 + 0.8 + 0.3) / 3; math.Abs(float64(cand.Mean)-want) > 1e-12 {
		t.Errorf("cand mean %v, want %v (blown budget scored 0, missing task left out)", cand.Mean, want)
	}
	if cand.Tasks != 3 || cand.Counts.TasksMissing != 1 || cand.Counts.Capped != 1 || cand.Counts.BudgetBlown != 1 || base.Counts.Preempted != 1 {
		t.Errorf("counts wrong: base %+v cand %+v", base.Counts, cand.Counts)
	}
	if math.Abs(float64(cand.Worst)-0.3) > 1e-12 || math.Abs(float64(base.Worst)-0.3) > 1e-12 {
		t.Errorf("worst: base %v cand %v", base.Worst, cand.Worst)
	}
	var warned bool
	for _, w := range r.Warnings {
		if w.Arm == "cand" && strings.Contains(w.Message, "not scored as zero") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("missing task raised no warning: %v", r.Warnings)
	}
	if r.Pairs[0].MissingTasks != 1 || r.Pairs[0].Outcome != Inconclusive {
		t.Errorf("pair with a missing task: %+v", r.Pairs[0])
	}
}

func TestPBestVerdict(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		pass    map[string]float64
		verdict string
		leader  string
	}{
		{name: "a far better arm is best", pass: map[string]float64{"base": 0.3, "cand": 0.8}, verdict: "best", leader: "cand"},
		{name: "equal arms tie", pass: map[string]float64{"base": 0.5, "cand": 0.5}, verdict: "tie"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Design: twoArmDesign(MeasurePass), Trials: passTrials(3, 100, tc.pass, map[string]float64{"base": 1, "cand": 1})}
			r, err := Analyse(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			k := r.Kinds[0]
			if k.Verdict != tc.verdict || (tc.leader != "" && k.Leader != tc.leader) {
				t.Fatalf("verdict %s leader %s (P(best) %v), want %s %s", k.Verdict, k.Leader, k.LeaderPBest, tc.verdict, tc.leader)
			}
			sum := 0.0
			for _, a := range k.Arms {
				sum += float64(a.PBest)
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Errorf("P(best) sums to %v", sum)
			}
			if tc.verdict == "tie" && len(k.TiedWith) != 2 {
				t.Errorf("tied set %v, want both arms", k.TiedWith)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	ctx := context.Background()
	// Continuous scores, so that two seeds cannot land on the same quantiles.
	in := Input{Design: twoArmDesign(MeasureScore), Trials: passTrials(5, 150, map[string]float64{"base": 0.5, "cand": 0.6}, map[string]float64{"base": 1, "cand": 1})}
	a, err := Analyse(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Analyse(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatal("same input and seed gave different reports")
	}
	in.Design.Seed++
	c, err := Analyse(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kinds[0].Arms[0].Interval == a.Kinds[0].Arms[0].Interval {
		t.Error("another seed gave the very same interval; the seed is not used")
	}
	if c.ComparisonHash == a.ComparisonHash {
		t.Error("the comparison hash ignores the seed")
	}
}

func TestBadInput(t *testing.T) {
	base := func() Input {
		return Input{Design: twoArmDesign(MeasurePass), Trials: passTrials(1, 20, map[string]float64{"base": 0.5, "cand": 0.5}, nil)}
	}
	tests := []struct {
		name   string
		mutate func(*Input)
		check  func(error) bool
		field  string
	}{
		{name: "pair names an unknown arm", mutate: func(in *Input) { in.Design.Pairs = append(in.Design.Pairs, Pair{Candidate: "ghost", Baseline: "base"}) },
			check: func(err error) bool { var e *UnknownArmError; return errors.As(err, &e) && e.Arm == "ghost" }, field: "design.pairs[1].candidate"},
		{name: "trials from two designs", mutate: func(in *Input) { in.Trials[3].DesignHash = "other"; in.Trials[4].DesignHash = "other" },
			check: func(err error) bool { var e *MixedDesignError; return errors.As(err, &e) && e.Others["other"] == 2 }, field: "other"},
		{name: "too few resamples", mutate: func(in *Input) { in.Design.Resamples = 500 },
			check: func(err error) bool { var e *FieldError; return errors.As(err, &e) }, field: "design.resamples"},
		{name: "score out of range", mutate: func(in *Input) { in.Trials[0].Score = 1.5 },
			check: func(err error) bool { var e *FieldError; return errors.As(err, &e) }, field: "trials[0].score"},
		{name: "rule cites an unnamed pair", mutate: func(in *Input) {
			in.Design.Rule.Clauses[0].If[0].Candidate, in.Design.Rule.Clauses[0].If[0].Baseline = "base", "cand"
		}, check: func(err error) bool { var e *FieldError; return errors.As(err, &e) }, field: "not named in design.pairs"},
		{name: "rule accepts the incumbent", mutate: func(in *Input) { in.Design.Rule.Clauses[0].Then = "accept base" },
			check: func(err error) bool { var e *FieldError; return errors.As(err, &e) }, field: "keep the incumbent"},
		{name: "rule with an unknown action", mutate: func(in *Input) { in.Design.Rule.Default = "celebrate" },
			check: func(err error) bool { var e *FieldError; return errors.As(err, &e) }, field: "design.rule.default"},
		{name: "two scored attempts of one trial", mutate: func(in *Input) { in.Trials = append(in.Trials, in.Trials[2]) },
			check: func(err error) bool { var e *FieldError; return errors.As(err, &e) }, field: "second scored result"},
		{name: "unknown measure", mutate: func(in *Input) { in.Design.JobKinds[0].Measure = "vibes" },
			check: func(err error) bool { var e *FieldError; return errors.As(err, &e) }, field: "design.job_kinds[0].measure"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.mutate(&in)
			_, err := Analyse(context.Background(), in)
			if err == nil || !tc.check(err) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v (%T)", err, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

func TestStaleHash(t *testing.T) {
	in := Input{Design: twoArmDesign(MeasurePass), Trials: passTrials(1, 30, map[string]float64{"base": 0.5, "cand": 0.6}, nil)}
	r, err := Analyse(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckHash(in, r.ComparisonHash); err != nil {
		t.Fatalf("fresh hash rejected: %v", err)
	}
	if r.Decision.ComparisonHash != r.ComparisonHash {
		t.Error("decision does not carry the comparison hash")
	}
	in.Trials[0].Pass = !in.Trials[0].Pass // the data moved after the report was read
	err = CheckHash(in, r.ComparisonHash)
	var stale *StaleHashError
	if !errors.As(err, &stale) || stale.Cited != r.ComparisonHash || !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want a StaleHashError", err)
	}
	// Reordering trials is not a change.
	in.Trials[0].Pass = !in.Trials[0].Pass
	in.Trials[0], in.Trials[5] = in.Trials[5], in.Trials[0]
	if err := CheckHash(in, r.ComparisonHash); err != nil {
		t.Errorf("trial order changed the hash: %v", err)
	}
}

func TestWriteSummary(t *testing.T) {
	in := Input{Design: twoArmDesign(MeasurePass), Trials: passTrials(7, 200, map[string]float64{"base": 0.4, "cand": 0.7}, map[string]float64{"base": 10, "cand": 11})}
	r, err := Analyse(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	// A pass job kind: Wilson for each arm, Tango for the pair, named beside each.
	for _, s := range []string{"intervals 95% (method beside each)", "] wilson", "] tango", "cand vs base", "improvement (shown at α = 0.05 after Holm)", "decision: accept cand", "clause 1"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("summary lacks %q:\n%s", s, b.String())
		}
	}
}

// TestCheckHashTakesAPrefix: the 12 characters the summary shows (or any
// prefix of 8 or more) cite the current comparison; anything else is
// refused with the full current hash, the flag the user typed and the fix.
func TestCheckHashTakesAPrefix(t *testing.T) {
	in := Input{Design: twoArmDesign(MeasurePass), Trials: passTrials(1, 30, map[string]float64{"base": 0.5, "cand": 0.6}, nil)}
	cur, err := ComparisonHash(in)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cited string
		ok          bool
		want        []string
	}{
		{"full", cur, true, nil},
		{"summary's 12", cur[:12], true, nil},
		{"upper case 8", strings.ToUpper(cur[:8]), true, nil},
		{"too short", cur[:6], false, []string{"--comparison " + cur[:6] + " is too short to cite: give at least 8 hex characters", cur}},
		{"other hash", "e0ba91736409", false, []string{"--comparison e0ba91736409 is stale", "the current comparison hash is " + cur, "the report's summary shows it"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckHash(in, tc.cited)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var stale *StaleHashError
			if !errors.As(err, &stale) {
				t.Fatalf("got %v, want a StaleHashError", err)
			}
			stale.Flag = "--comparison"
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q lacks %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "comparison_hash") || strings.Contains(err.Error(), "comparisonHash") {
				t.Errorf("%q names the JSON field, not the flag", err)
			}
		})
	}
}

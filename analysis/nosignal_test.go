package analysis

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
)

// threeArmZeros is the newcomer's study from issue 32: three arms, 30
// tasks, one repeat, every arm failing every task.
func threeArmZeros(t *testing.T, pass func(arm string, task int) bool) *Report {
	t.Helper()
	d := Design{Hash: "z", Incumbent: "a", Seed: 5, PBestBar: 0.8,
		Arms:     []Arm{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		JobKinds: []JobKind{{Name: "classify", Measure: MeasurePass}},
		Pairs:    []Pair{{Candidate: "b", Baseline: "a"}, {Candidate: "c", Baseline: "a"}},
		Rule:     Rule{Clauses: []Clause{{Check: CheckPBestBelowBar, Then: "keep the incumbent"}}, Default: "needs_review"}}
	var ts []Trial
	for task := range 30 {
		for _, arm := range []string{"a", "b", "c"} {
			ts = append(ts, Trial{DesignHash: "z", Arm: arm, JobKind: "classify", Task: fmt.Sprintf("m%02d", task), Pass: pass(arm, task), WallSeconds: 1})
		}
	}
	r, err := Analyse(context.Background(), Input{Design: d, Trials: ts})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestNothingMeasuredIsNoSignal: every arm failing every task is "no
// signal" with a plain warning and no leader, not a three-way tie with a
// leader; its intervals are Wilson's [0, 0.114], never [0, 0].
func TestNothingMeasuredIsNoSignal(t *testing.T) {
	r := threeArmZeros(t, func(string, int) bool { return false })
	k := r.Kinds[0]
	if k.Verdict != NoSignal || k.Leader != "" || k.LeaderPBest.Valid() {
		t.Errorf("verdict %q leader %q P(best) %v, want no signal, no leader, no P(best)", k.Verdict, k.Leader, k.LeaderPBest)
	}
	var warned bool
	for _, w := range r.Warnings {
		if w.JobKind == "classify" && strings.Contains(w.Message, "no arm passed any of the 30 tasks") && strings.Contains(w.Message, "no signal, not a tie") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no plain no-signal warning in %v", r.Warnings)
	}
	for _, a := range k.Arms {
		if a.Interval.Method != WilsonBlaker || a.Interval.Lo != 0 || math.Abs(float64(a.Interval.Hi)-0.1135) > 5e-4 {
			t.Errorf("%s: interval %+v, want wilson-blaker [0, 0.114]", a.Arm, a.Interval)
		}
	}
	for _, p := range r.Pairs {
		if p.Shown != "no signal" || !strings.Contains(p.Reason, "no signal") || p.Interval.Method != TangoEdges || !(p.Interval.Hi > 0.1) {
			t.Errorf("%s: shown %q, reason %q, interval %+v; want no signal and a tango-edges interval of width", p.Candidate, p.Shown, p.Reason, p.Interval)
		}
	}
	// The rule's P(best) clause still holds, as it did for the tie.
	if r.Decision.Action != "keep the incumbent" || !strings.Contains(strings.Join(r.Decision.Trace, "\n"), "no P(best) (no signal)") {
		t.Errorf("decision %q, trace %q", r.Decision.Action, r.Decision.Trace)
	}
}

// TestExactTieNamesNoLeader: arms that agree task by task on a bank that
// tells tasks apart are a measured tie, not "no signal"; P(best) splits
// exactly, so no arm is named the leader.
func TestExactTieNamesNoLeader(t *testing.T) {
	r := threeArmZeros(t, func(_ string, task int) bool { return task%3 == 0 })
	k := r.Kinds[0]
	if k.Verdict != "tie" || k.Leader != "" || len(k.TiedWith) == 0 {
		t.Errorf("verdict %q leader %q tied %v, want a tie with no leader", k.Verdict, k.Leader, k.TiedWith)
	}
	for _, w := range r.Warnings {
		if strings.Contains(w.Message, "no signal") {
			t.Errorf("a measured tie was called no signal: %v", w)
		}
	}
	if !strings.Contains(strings.Join(r.Decision.Trace, "\n"), "no single leader") {
		t.Errorf("trace %q does not say there is no single leader", r.Decision.Trace)
	}
}

// TestDegenerateBootstrapIsNotZeroWidth: a score job kind whose tasks all
// scored the same gets the exact no-spread bound, named, never [v, v].
func TestDegenerateBootstrapIsNotZeroWidth(t *testing.T) {
	ts := passTrials(1, 25, map[string]float64{"base": 1, "cand": 1}, map[string]float64{"base": 1, "cand": 1})
	for i := range ts {
		ts[i].Score = 0.5
		if ts[i].Arm == "cand" && ts[i].Task == "t003" {
			ts[i].Score = 0.7
		}
	}
	r, err := Analyse(context.Background(), Input{Design: twoArmDesign(MeasureScore), Trials: ts})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Kinds[0].Arms {
		iv := a.Interval
		switch a.Arm {
		case "base":
			if iv.Method != NoSpread || !(iv.Lo < 0.5 && iv.Hi > 0.5) || iv.Note == "" {
				t.Errorf("base (every task 0.5): %+v, want an exact-no-spread bound around 0.5 with a note", iv)
			}
		case "cand":
			if iv.Method != BCa || !(iv.Hi > iv.Lo) {
				t.Errorf("cand (one task differs): %+v, want the design's BCa with width", iv)
			}
		}
	}
}

// TestEchoesPrompt: the Gemma base model's output of issue 32 (the prompt
// again, then junk) is an echo; an answer, or one quoting a few words of
// its input, is not.
func TestEchoesPrompt(t *testing.T) {
	prompt := "<start_of_turn>user\nClassify the customer message into one of billing, delivery, account or other. Answer with the label only.\nMessage: My parcel was due on Monday and it still has not arrived, can you check where it is?<end_of_turn>\n<start_of_turn>model\n"
	for _, c := range []struct {
		output string
		want   bool
	}{
		{"Classify the customer message into one of billing, delivery, account or other. Answer with the label only. Message: My parcel was due on Monday and it still has not arrived mendatang 受信 ShoppingCart", true},
		{"delivery", false},
		{"delivery: the parcel was due on Monday and it still has not arrived", false},
		{"", false},
	} {
		if got := EchoesPrompt(prompt, c.output); got != c.want {
			t.Errorf("EchoesPrompt(…, %q) = %v, want %v", c.output, got, c.want)
		}
	}
}

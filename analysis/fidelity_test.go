package analysis

import (
	"context"
	"strings"
	"testing"
)

// fidelityInput is improvedInput with a fidelity_kl guardrail of at most
// limit and, for cand vs base, a fake paired difference in mean KL whose
// interval is [lo, hi].
func fidelityInput(limit, lo, hi float64) Input {
	in := improvedInput(1, 1)
	in.Design.Guardrails = []Guardrail{{Metric: MetricFidelityKL, MaxAbsolute: &limit}}
	in.Fidelity = []FidelityKL{{JobKind: in.Design.JobKinds[0].Name, Candidate: "cand", Baseline: "base",
		CandidateValue: Num((lo + hi) / 2), BaselineValue: 0, Delta: Num((lo + hi) / 2),
		Interval: Interval{Lo: Num(lo), Hi: Num(hi), Level: 0.95, Method: BCa}}}
	return in
}

// TestFidelityGuardrailReadsTheInterval: the guardrail holds when the
// whole interval of the extra mean KL is within the limit and blocks when
// its upper bound is over, even with the estimate under the limit; a pair
// with no fidelity figures blocks as not measured.
func TestFidelityGuardrailReadsTheInterval(t *testing.T) {
	rep := analyseT(t, fidelityInput(0.05, 0.01, 0.03))
	if c := constraintOf(t, rep, "guardrails[0]"); c.Blocks || !strings.Contains(c.Reading, "within the limit of 0.05") || !strings.Contains(c.Limit, "nats/token") {
		t.Errorf("interval under the limit: %+v; want it to hold", c)
	}
	if rep.Decision.Verdict != Accept {
		t.Errorf("a holding fidelity guardrail blocked the winner: %s", strings.Join(rep.Decision.Trace, "\n"))
	}
	rep = analyseT(t, fidelityInput(0.05, 0.03, 0.06))
	if c := constraintOf(t, rep, "guardrails[0]"); !c.Blocks || !strings.Contains(c.Reading, "over the limit of 0.05") {
		t.Errorf("upper bound 0.06 over 0.05 (estimate 0.045 under): %+v; want it to block", c)
	}
	if rep.Decision.Verdict == Accept {
		t.Error("accepted with a fidelity guardrail blocking")
	}
	in := fidelityInput(0.05, 0.01, 0.03)
	in.Fidelity = nil
	if c := constraintOf(t, analyseT(t, in), "guardrails[0]"); !c.Blocks || !strings.Contains(c.Reading, "not measured") {
		t.Errorf("no figures: %+v; want it to block as not measured", c)
	}
}

// TestFidelityGuardrailTakesAnAbsoluteLimit: a relative limit or a
// higher-is-better direction on fidelity_kl is refused by field.
func TestFidelityGuardrailTakesAnAbsoluteLimit(t *testing.T) {
	for _, g := range []Guardrail{{Metric: MetricFidelityKL, MaxRelative: ptr(0.1)}, {Metric: MetricFidelityKL, MaxAbsolute: ptr(0.1), HigherIsBetter: true}} {
		in := improvedInput(1, 1)
		in.Design.Guardrails = []Guardrail{g}
		if _, err := Analyse(context.Background(), in); err == nil || !strings.Contains(err.Error(), "design.guardrails[0]") || !strings.Contains(err.Error(), "nats/token") {
			t.Errorf("guardrail %+v: err %v, want one naming design.guardrails[0] and the absolute limit", g, err)
		}
	}
}

// TestFidelityEntersTheHashOnlyWhenPresent: without fidelity figures the
// comparison hash is what it was before they existed; with them it
// changes, so a decision recorded on other fidelity records is stale.
func TestFidelityEntersTheHashOnlyWhenPresent(t *testing.T) {
	in := fidelityInput(0.05, 0.01, 0.03)
	with, err := ComparisonHash(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Fidelity = nil
	without, err := ComparisonHash(in)
	if err != nil {
		t.Fatal(err)
	}
	if with == without {
		t.Error("fidelity figures do not enter the comparison hash")
	}
	in.Fidelity = []FidelityKL{}
	if empty, _ := ComparisonHash(in); empty != without {
		t.Error("an empty fidelity list changed the hash")
	}
}

// fidelityRankedInput is a two-arm pass study, cand passing candPass and
// base basePass of 300 paired tasks, whose job kind ranks by fidelity, with
// a fake paired difference in mean KL (cand − base) whose interval is
// [lo, hi].
func fidelityRankedInput(candPass, basePass, lo, hi float64) Input {
	d := twoArmDesign(MeasurePass)
	d.JobKinds[0].RankBy = MetricFidelityKL
	in := Input{Design: d, Trials: passTrials(3, 300, map[string]float64{"base": basePass, "cand": candPass}, map[string]float64{"base": 1, "cand": 1})}
	in.Fidelity = []FidelityKL{{JobKind: d.JobKinds[0].Name, Candidate: "cand", Baseline: "base",
		CandidateValue: Num(0.1 + (lo+hi)/2), BaselineValue: 0.1, Delta: Num((lo + hi) / 2),
		Interval: Interval{Lo: Num(lo), Hi: Num(hi), Level: 0.95, Method: BCa}}}
	return in
}

// onlyPair is the report's one pair.
func onlyPair(t *testing.T, rep *Report) PairResult {
	t.Helper()
	if len(rep.Pairs) != 1 {
		t.Fatalf("%d pairs, want 1", len(rep.Pairs))
	}
	return rep.Pairs[0]
}

// TestFidelityRankingDecidesThePair: in a job kind ranked by fidelity the
// pair's KL interval decides, whatever the pass rates say: a candidate
// clearly closer to the reference leads though it passes fewer tasks, one
// clearly further is kept out though it passes more, and an interval
// spanning 0 leads nowhere (the rule's default).
func TestFidelityRankingDecidesThePair(t *testing.T) {
	tests := []struct {
		name               string
		candPass, basePass float64
		lo, hi             float64
		outcome            Outcome
		verdict            Verdict
		reasonHas          string
	}{
		{"candidate clearly closer", 0.4, 0.8, -0.08, -0.02, Improvement, Accept, "wholly below 0"},
		{"candidate clearly further", 0.8, 0.4, 0.02, 0.08, Regression, Keep, "wholly above 0"},
		{"interval spans 0", 0.8, 0.4, -0.03, 0.02, Inconclusive, Undecided, "spans 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyseT(t, fidelityRankedInput(tc.candPass, tc.basePass, tc.lo, tc.hi))
			p := onlyPair(t, rep)
			if p.Outcome != tc.outcome || !strings.Contains(p.Reason, tc.reasonHas) {
				t.Errorf("outcome %s (%s); want %s, reason with %q", p.Outcome, p.Reason, tc.outcome, tc.reasonHas)
			}
			if float64(p.Interval.Lo) != tc.lo || float64(p.Interval.Hi) != tc.hi || !strings.Contains(p.Test, "mean KL") {
				t.Errorf("pair interval %+v test %q; want the fidelity figures' [%v, %v]", p.Interval, p.Test, tc.lo, tc.hi)
			}
			if rep.Decision.Verdict != tc.verdict {
				t.Errorf("verdict %s, want %s:\n%s", rep.Decision.Verdict, tc.verdict, strings.Join(rep.Decision.Trace, "\n"))
			}
			if rep.Kinds[0].RankBy != MetricFidelityKL {
				t.Errorf("kind ranked by %q; want fidelity_kl", rep.Kinds[0].RankBy)
			}
			var sum strings.Builder
			if err := rep.WriteSummary(&sum); err != nil || !strings.Contains(sum.String(), "pairs ranked by mean KL per token to the reference") {
				t.Errorf("summary (%v) does not say the pairs rank by mean KL:\n%s", err, sum.String())
			}
		})
	}
}

// TestFidelityRankingWithoutFiguresIsInconclusive: a pair whose fidelity
// the records never paired cannot lead, even with a pass-rate lead.
func TestFidelityRankingWithoutFiguresIsInconclusive(t *testing.T) {
	in := fidelityRankedInput(0.8, 0.4, -0.08, -0.02)
	in.Fidelity = nil
	rep := analyseT(t, in)
	if p := onlyPair(t, rep); p.Outcome != Inconclusive || !strings.Contains(p.Reason, "fidelity not measured") {
		t.Errorf("outcome %s (%s); want inconclusive, fidelity not measured", p.Outcome, p.Reason)
	}
	if rep.Decision.Verdict == Accept {
		t.Error("accepted on pass rates in a job kind ranked by fidelity")
	}
}

// TestFidelityRankingStillHeldByGuardrails: a candidate that leads on
// fidelity is still blocked by a guardrail it breaks.
func TestFidelityRankingStillHeldByGuardrails(t *testing.T) {
	in := fidelityRankedInput(0.4, 0.8, -0.08, -0.02)
	in.Trials = passTrials(3, 300, map[string]float64{"base": 0.8, "cand": 0.4}, map[string]float64{"base": 10, "cand": 12})
	in.Design.Guardrails = []Guardrail{{Metric: MetricP95Latency, MaxRelative: ptr(0.1)}}
	rep := analyseT(t, in)
	if p := onlyPair(t, rep); p.Outcome != Improvement {
		t.Fatalf("outcome %s (%s); want the fidelity lead", p.Outcome, p.Reason)
	}
	if c := constraintOf(t, rep, "guardrails[0]"); !c.Blocks {
		t.Errorf("p95 20%% slower against a 10%% limit: %+v; want it to block", c)
	}
	if rep.Decision.Verdict != Keep {
		t.Errorf("verdict %s, want the guardrail to keep the incumbent:\n%s", rep.Decision.Verdict, strings.Join(rep.Decision.Trace, "\n"))
	}
}

// TestFidelityRankingEntersTheHashOnlyWhenSet: a job kind ranked by its
// measure hashes as before rank_by existed (the golden hashes hold it); one
// ranked by fidelity hashes differently.
func TestFidelityRankingEntersTheHashOnlyWhenSet(t *testing.T) {
	in := improvedInput(1, 1)
	before, err := ComparisonHash(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Design.JobKinds[0].RankBy = MetricFidelityKL
	after, err := ComparisonHash(in)
	if err != nil {
		t.Fatal(err)
	}
	if before == after {
		t.Error("ranking by fidelity did not change the comparison hash")
	}
	in.Design.JobKinds[0].RankBy = "perplexity"
	if _, err := Analyse(context.Background(), in); err == nil || !strings.Contains(err.Error(), "design.job_kinds[0].rank_by") {
		t.Errorf("rank_by perplexity: %v; want it refused by field", err)
	}
}

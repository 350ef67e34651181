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

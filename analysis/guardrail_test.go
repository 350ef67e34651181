package analysis

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
)

func ptr(v float64) *float64 { return &v }

// improvedInput is a two-arm pass study where cand is shown better than base
// (pass 0.8 against 0.4 on 300 paired tasks); wall seconds are per arm.
func improvedInput(baseWall, candWall float64) Input {
	d := twoArmDesign(MeasurePass)
	return Input{Design: d, Trials: passTrials(3, 300, map[string]float64{"base": 0.4, "cand": 0.8}, map[string]float64{"base": baseWall, "cand": candWall})}
}

func analyseT(t *testing.T, in Input) *Report {
	t.Helper()
	rep, err := Analyse(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func constraintOf(t *testing.T, rep *Report, clause string) Constraint {
	t.Helper()
	for _, c := range rep.Constraints {
		if c.Clause == clause {
			return c
		}
	}
	t.Fatalf("no constraint %s in %+v", clause, rep.Constraints)
	return Constraint{}
}

func TestGuardrailsAndPolicyBlockOrNot(t *testing.T) {
	tests := []struct {
		name        string
		base, cand  float64 // wall seconds
		guardrails  []Guardrail
		policy      *WinnerPolicy
		edit        func(in *Input)
		clause      string
		blocks      bool
		readingHas  string
		wantVerdict Verdict
	}{
		{name: "p95 within the guardrail", base: 10, cand: 10.5, guardrails: []Guardrail{{Metric: MetricP95Latency, MaxRelative: ptr(0.1)}},
			clause: "guardrails[0]", readingHas: "5.0% slower, within the limit of 10.0%", wantVerdict: Accept},
		{name: "p95 past the guardrail", base: 10, cand: 12, guardrails: []Guardrail{{Metric: MetricP95Latency, MaxRelative: ptr(0.1)}},
			clause: "guardrails[0]", blocks: true, readingHas: "20.0% slower, over the limit of 10.0%", wantVerdict: Keep},
		{name: "wall time absolute within", base: 10, cand: 11, guardrails: []Guardrail{{Metric: MetricWallTime, MaxAbsolute: ptr(2)}},
			clause: "guardrails[0]", readingHas: "1 slower, within the limit of 2", wantVerdict: Accept},
		{name: "wall time absolute past", base: 10, cand: 13, guardrails: []Guardrail{{Metric: MetricWallTime, MaxAbsolute: ptr(2)}},
			clause: "guardrails[0]", blocks: true, readingHas: "3 slower, over the limit of 2", wantVerdict: Keep},
		{name: "peak memory not measured blocks", base: 10, cand: 10, guardrails: []Guardrail{{Metric: MetricPeakMemory, MaxAbsolute: ptr(512)}},
			clause: "guardrails[0]", blocks: true, readingHas: "not measured", wantVerdict: Keep},
		{name: "higher-is-better receipt metric falls too far", base: 10, cand: 10,
			guardrails: []Guardrail{{Metric: "receipt.output_tok_s", HigherIsBetter: true, MaxRelative: ptr(0.2)}},
			edit: func(in *Input) {
				for i := range in.Trials {
					in.Trials[i].Metrics = map[string]float64{"output_tok_s": map[string]float64{"base": 40, "cand": 20}[in.Trials[i].Arm]}
				}
			}, clause: "guardrails[0]", blocks: true, readingHas: "20 vs 40, 50.0% slower", wantVerdict: Keep},
		{name: "higher-is-better receipt metric rises", base: 10, cand: 10,
			guardrails: []Guardrail{{Metric: "receipt.output_tok_s", HigherIsBetter: true, MaxRelative: ptr(0.2)}},
			edit: func(in *Input) {
				for i := range in.Trials {
					in.Trials[i].Metrics = map[string]float64{"output_tok_s": map[string]float64{"base": 20, "cand": 40}[in.Trials[i].Arm]}
				}
			}, clause: "guardrails[0]", readingHas: "100.0% faster, within the limit", wantVerdict: Accept},
		{name: "pass-rate lead too small", base: 10, cand: 10, policy: &WinnerPolicy{MinPassRateDelta: ptr(0.9), AllowRegressions: true},
			clause: "winner_policy.min_pass_rate_delta", blocks: true, readingHas: "delta +0.", wantVerdict: Keep},
		{name: "pass-rate lead enough", base: 10, cand: 10, policy: &WinnerPolicy{MinPassRateDelta: ptr(0), AllowRegressions: true},
			clause: "winner_policy.min_pass_rate_delta", readingHas: "delta +0.", wantVerdict: Accept},
		{name: "cost increase within", base: 10, cand: 11, policy: &WinnerPolicy{MaxCostIncrease: ptr(0.15)},
			clause: "winner_policy.max_cost_increase", readingHas: "10.0% costlier, within the limit of 15.0%", wantVerdict: Accept},
		{name: "cost increase past", base: 10, cand: 13, policy: &WinnerPolicy{MaxCostIncrease: ptr(0.15)},
			clause: "winner_policy.max_cost_increase", blocks: true, readingHas: "30.0% costlier, over the limit of 15.0%", wantVerdict: Keep},
		{name: "p95 increase past", base: 10, cand: 13, policy: &WinnerPolicy{MaxP95LatencyIncrease: ptr(0.1)},
			clause: "winner_policy.max_p95_latency_increase", blocks: true, readingHas: "1.3e+04 vs 1e+04", wantVerdict: Keep},
		{name: "a new paired regression blocks", base: 10, cand: 10, policy: &WinnerPolicy{},
			edit: newRegression, clause: "winner_policy.allow_regressions", blocks: true, readingHas: "1 newly failing paired tasks", wantVerdict: Keep},
		{name: "regressions allowed", base: 10, cand: 10, policy: &WinnerPolicy{AllowRegressions: true},
			edit: newRegression, clause: "winner_policy.allow_regressions", readingHas: "1 newly failing", wantVerdict: Accept},
		{name: "no regression", base: 10, cand: 10, policy: &WinnerPolicy{},
			clause: "winner_policy.allow_regressions", readingHas: "0 newly failing", wantVerdict: Accept},
		{name: "judges on different scales block", base: 10, cand: 10, policy: &WinnerPolicy{},
			edit: func(in *Input) { in.Design.Arms[1].JudgeID = "judge-b" }, clause: "winner_policy.allow_incomparable_judges", blocks: true, readingHas: "judge identities differ", wantVerdict: Undecided},
		{name: "judges on different scales allowed", base: 10, cand: 10, policy: &WinnerPolicy{AllowIncomparableJudges: true},
			edit: func(in *Input) { in.Design.Arms[1].JudgeID = "judge-b" }, clause: "winner_policy.allow_incomparable_judges", readingHas: "judge identities differ", wantVerdict: Undecided},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := improvedInput(tc.base, tc.cand)
			in.Design.Guardrails, in.Design.Policy = tc.guardrails, tc.policy
			if tc.edit != nil {
				tc.edit(&in)
			}
			rep := analyseT(t, in)
			c := constraintOf(t, rep, tc.clause)
			if c.Blocks != tc.blocks || !strings.Contains(c.Reading, tc.readingHas) {
				t.Errorf("%s: blocks %v reading %q, want blocks %v and %q", tc.clause, c.Blocks, c.Reading, tc.blocks, tc.readingHas)
			}
			dec := rep.Decision
			if dec.Verdict != tc.wantVerdict {
				t.Errorf("verdict %s, want %s; trace:\n%s", dec.Verdict, tc.wantVerdict, strings.Join(dec.Trace, "\n"))
			}
			blockedLine := `"accept cand" blocked by ` + tc.clause
			if got := strings.Contains(strings.Join(dec.Trace, "\n"), blockedLine); got != (tc.blocks && tc.wantVerdict == Keep) {
				t.Errorf("trace names %q: %v, want %v; trace:\n%s", blockedLine, got, tc.blocks && tc.wantVerdict == Keep, strings.Join(dec.Trace, "\n"))
			}
			if tc.blocks && tc.wantVerdict == Keep && dec.NextBaseline != "base" {
				t.Errorf("a blocked winner moved the baseline to %q", dec.NextBaseline)
			}
		})
	}
}

// newRegression makes one task the baseline passes fail for the candidate.
func newRegression(in *Input) {
	for _, tr := range in.Trials {
		if tr.Arm == "base" && tr.Pass {
			for j := range in.Trials {
				if in.Trials[j].Arm == "cand" && in.Trials[j].Task == tr.Task {
					in.Trials[j].Pass = false
					return
				}
			}
		}
	}
}

// TestGuardrailNeverMakesAWinner: a candidate that is no better is not
// accepted because its guardrails all hold.
func TestGuardrailNeverMakesAWinner(t *testing.T) {
	d := twoArmDesign(MeasurePass)
	d.Guardrails = []Guardrail{{Metric: MetricWallTime, MaxRelative: ptr(0.5)}}
	d.Policy = &WinnerPolicy{MaxCostIncrease: ptr(1), AllowRegressions: true}
	in := Input{Design: d, Trials: passTrials(3, 300, map[string]float64{"base": 0.5, "cand": 0.5}, map[string]float64{"base": 10, "cand": 2})}
	rep := analyseT(t, in)
	for _, c := range rep.Constraints {
		if c.Blocks {
			t.Errorf("%s blocks a faster candidate", c)
		}
	}
	if rep.Decision.Verdict == Accept {
		t.Errorf("accepted on guardrails alone; trace:\n%s", strings.Join(rep.Decision.Trace, "\n"))
	}
}

func TestGuardrailInputRefused(t *testing.T) {
	for _, g := range []Guardrail{{Metric: "latency", MaxRelative: ptr(1)}, {Metric: MetricEnergy}, {Metric: MetricEnergy, MaxRelative: ptr(1), MaxAbsolute: ptr(1)}, {Metric: MetricEnergy, MaxAbsolute: ptr(-1)}} {
		in := improvedInput(1, 1)
		in.Design.Guardrails = []Guardrail{g}
		if _, err := Analyse(context.Background(), in); err == nil || !strings.Contains(err.Error(), "design.guardrails[0]") {
			t.Errorf("guardrail %+v: err %v, want one naming design.guardrails[0]", g, err)
		}
	}
}

func TestLatencyPercentilesAndDeltas(t *testing.T) {
	in := improvedInput(1, 2)
	n := 0
	for i := range in.Trials {
		if in.Trials[i].Arm == "base" {
			in.Trials[i].WallSeconds = float64(n%100 + 1) // 1..100 s, three times over
			n++
		}
	}
	rep := analyseT(t, in)
	got := map[string]Latency{}
	for _, l := range rep.Latency {
		got[l.Arm] = l
	}
	b, c := got["base"], got["cand"]
	// Type-7 over 1..100 (each thrice): p50 50.5 s, p95 95.05 s.
	if math.Abs(float64(b.P50MS)-50500) > 1e-6 || math.Abs(float64(b.P95MS)-95050) > 1e-6 || b.Trials != 300 {
		t.Errorf("base latency %+v, want p50 50500 ms, p95 95050 ms over 300 trials", b)
	}
	if b.DeltaP50MS.Valid() {
		t.Errorf("the incumbent has a delta against itself: %v", b.DeltaP50MS)
	}
	if float64(c.P95MS) != 2000 || math.Abs(float64(c.DeltaP50MS)+48500) > 1e-6 || math.Abs(float64(c.DeltaP95MS)+93050) > 1e-6 {
		t.Errorf("cand latency %+v, want p95 2000 ms, deltas -48500 and -93050", c)
	}
}

func TestSampleRatioMismatch(t *testing.T) {
	lose := func(in *Input, arm string, n int) {
		for i := range in.Trials {
			if n > 0 && in.Trials[i].Arm == arm {
				in.Trials[i].Missing, in.Trials[i].Reason = true, "error: fake runtime failure"
				n--
			}
		}
	}
	tests := []struct {
		name     string
		lost     int
		mismatch bool
	}{
		{"balanced", 0, false},
		{"a few lost is chance", 20, false},
		{"many lost is a mismatch", 150, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := improvedInput(1, 1)
			lose(&in, "cand", tc.lost)
			rep := analyseT(t, in)
			if len(rep.SRM) != 1 {
				t.Fatalf("SRM %+v, want one job kind", rep.SRM)
			}
			s := rep.SRM[0]
			if s.Planned[0] != 300 || s.Planned[1] != 300 || s.Scored[1] != 300-tc.lost || s.DF != 1 {
				t.Errorf("counts %+v", s)
			}
			// Chi-square with one degree of freedom: p = erfc(sqrt(x/2)).
			o := []float64{300, float64(300 - tc.lost)}
			e := (o[0] + o[1]) / 2
			x := (o[0]-e)*(o[0]-e)/e + (o[1]-e)*(o[1]-e)/e
			if math.Abs(float64(s.ChiSq)-x) > 1e-9 || math.Abs(float64(s.P)-math.Erfc(math.Sqrt(x/2))) > 1e-12 {
				t.Errorf("chi-square %v p %v, want %v and %v", s.ChiSq, s.P, x, math.Erfc(math.Sqrt(x/2)))
			}
			if s.Mismatch != tc.mismatch {
				t.Errorf("mismatch %v at p %v, want %v", s.Mismatch, s.P, tc.mismatch)
			}
			warned := strings.Contains(fmt.Sprint(rep.Warnings), "sample-ratio mismatch")
			if warned != tc.mismatch {
				t.Errorf("warned %v, want %v: %v", warned, tc.mismatch, rep.Warnings)
			}
		})
	}
}

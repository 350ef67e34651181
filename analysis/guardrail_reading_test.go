package analysis

import (
	"strings"
	"testing"
)

// TestGuardrailReadingFollowsTheMetricsDirection: a guardrail's reading
// says which way the candidate moved in the metric's own terms, so an arm
// 15.5% faster is never read as "-15.5% worse" (issue 46).
func TestGuardrailReadingFollowsTheMetricsDirection(t *testing.T) {
	tokS := func(base, cand float64) func(*Input) {
		return func(in *Input) {
			for i := range in.Trials {
				in.Trials[i].Metrics = map[string]float64{"output_tok_s": map[string]float64{"base": base, "cand": cand}[in.Trials[i].Arm]}
			}
		}
	}
	memory := func(base, cand float64) func(*Input) {
		return func(in *Input) {
			for i := range in.Trials {
				in.Trials[i].Metrics = map[string]float64{"peak_memory_bytes": map[string]float64{"base": base, "cand": cand}[in.Trials[i].Arm]}
			}
		}
	}
	tests := []struct {
		name       string
		base, cand float64 // wall seconds
		g          Guardrail
		edit       func(*Input)
		blocks     bool
		want       string
	}{
		{name: "lower-is-better, candidate faster", base: 1.370, cand: 1.158, g: Guardrail{Metric: MetricP95Latency, MaxRelative: ptr(0.1)},
			want: "1158 vs 1370, 15.5% faster, within the limit of 10.0%"},
		{name: "lower-is-better, candidate slower past", base: 10, cand: 12, g: Guardrail{Metric: MetricP95Latency, MaxRelative: ptr(0.1)},
			blocks: true, want: "1.2e+04 vs 1e+04, 20.0% slower, over the limit of 10.0%"},
		{name: "lower-is-better, candidate slower within", base: 10, cand: 10.5, g: Guardrail{Metric: MetricWallTime, MaxRelative: ptr(0.1)},
			want: "10.5 vs 10, 5.0% slower, within the limit of 10.0%"},
		{name: "lower-is-better absolute, faster", base: 13, cand: 10, g: Guardrail{Metric: MetricWallTime, MaxAbsolute: ptr(2)},
			want: "10 vs 13, 3 faster, within the limit of 2"},
		{name: "lower-is-better absolute, slower past", base: 10, cand: 13, g: Guardrail{Metric: MetricWallTime, MaxAbsolute: ptr(2)},
			blocks: true, want: "13 vs 10, 3 slower, over the limit of 2"},
		{name: "higher-is-better, candidate rises", base: 10, cand: 10, g: Guardrail{Metric: "receipt.output_tok_s", HigherIsBetter: true, MaxRelative: ptr(0.2)},
			edit: tokS(20, 40), want: "40 vs 20, 100.0% faster, within the limit of 20.0%"},
		{name: "higher-is-better, candidate falls past", base: 10, cand: 10, g: Guardrail{Metric: "receipt.output_tok_s", HigherIsBetter: true, MaxRelative: ptr(0.2)},
			edit: tokS(40, 20), blocks: true, want: "20 vs 40, 50.0% slower, over the limit of 20.0%"},
		{name: "higher-is-better absolute, falls within", base: 10, cand: 10, g: Guardrail{Metric: "receipt.output_tok_s", HigherIsBetter: true, MaxAbsolute: ptr(5)},
			edit: tokS(40, 38), want: "38 vs 40, 2 slower, within the limit of 5"},
		{name: "generic lower-is-better, lower", base: 10, cand: 10, g: Guardrail{Metric: "receipt.peak_memory_bytes", MaxRelative: ptr(0.1)},
			edit: memory(200, 100), want: "100 vs 200, 50.0% lower (better), within the limit of 10.0%"},
		{name: "generic lower-is-better, higher past", base: 10, cand: 10, g: Guardrail{Metric: "receipt.peak_memory_bytes", MaxRelative: ptr(0.1)},
			edit: memory(100, 200), blocks: true, want: "200 vs 100, 100.0% higher (worse), over the limit of 10.0%"},
		{name: "no change", base: 10, cand: 10, g: Guardrail{Metric: MetricWallTime, MaxRelative: ptr(0)},
			want: "10 vs 10, no change, within the limit of 0.0%"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := improvedInput(tc.base, tc.cand)
			in.Design.Guardrails = []Guardrail{tc.g}
			if tc.edit != nil {
				tc.edit(&in)
			}
			c := constraintOf(t, analyseT(t, in), "guardrails[0]")
			if c.Blocks != tc.blocks || c.Reading != tc.want {
				t.Errorf("blocks %v reading %q, want blocks %v reading %q", c.Blocks, c.Reading, tc.blocks, tc.want)
			}
			if strings.Contains(c.Reading, "-") {
				t.Errorf("reading %q carries a sign; the direction word says which way", c.Reading)
			}
		})
	}
}

package studies

import (
	"fmt"
	"slices"
	"strings"
)

// Guardrail is a metric that may be the reason to say no to a challenger,
// never the reason to say yes: the analysis reports it for every pair, and a
// challenger whose metric is worse than the incumbent's by more than the
// allowed degradation is not switched to. Exactly one of MaxRelativeIncrease
// and MaxAbsoluteIncrease is set.
type Guardrail struct {
	// Metric is one of GuardrailMetrics, or "receipt.FIELD" for a numeric
	// field every receipt records (the mean per scored trial is compared).
	Metric string `json:"metric"`
	// Direction says which way the metric is better, "lower" or "higher";
	// only a receipt metric needs it (the named metrics are lower-is-better).
	Direction string `json:"direction,omitempty"`
	// MaxRelativeIncrease is the largest degradation allowed as a fraction of
	// the incumbent's value: 0.1 lets the challenger be 10% worse.
	MaxRelativeIncrease *float64 `json:"max_relative_increase,omitempty"`
	// MaxAbsoluteIncrease is the largest degradation allowed in the metric's
	// own unit (GuardrailUnit).
	MaxAbsoluteIncrease *float64 `json:"max_absolute_increase,omitempty"`
}

// Guardrail metrics rig measures itself; all are lower-is-better. They
// are the design's words, kept here because studies imports no analysis;
// report/findings' test holds them to analysis.Metric*, which reads them.
const (
	MetricCost       = "cost"        // the rule's cost measure: mean wall seconds per trial
	MetricWallTime   = "wall_time"   // mean wall seconds per scored trial
	MetricP95Latency = "p95_latency" // 95th percentile of wall time per scored trial, ms
	MetricPeakMemory = "peak_memory" // the largest peak memory of any trial, MiB
	MetricEnergy     = "energy"      // mean energy per scored trial, Wh
	// MetricFidelityKL is the mean KL divergence per token of an arm's
	// next-token distributions from its job kind's reference arm's, nats
	// (docs/fidelity.md): every job kind must name a reference, and the
	// limit is absolute (the reference's own KL is zero).
	MetricFidelityKL = "fidelity_kl"
)

// ReceiptMetricPrefix starts a guardrail on a receipt field, "receipt.FIELD".
const ReceiptMetricPrefix = "receipt."

// ReceiptMetricFields are the receipt's numeric measurements, by their JSON
// names, that a "receipt.FIELD" guardrail may name, in the order a refusal
// lists them. report/findings' test holds them to analysis.ReceiptFields
// (what the analysis can read), which its other test holds to the receipt.
var ReceiptMetricFields = []string{"input_tokens", "thinking_tokens", "output_tokens", "prompt_tok_s", "output_tok_s",
	"ttft_ms", "tpot_ms", "wall_ms", "peak_memory_bytes", "peak_gpu_memory_bytes", "energy_joules"}

// GuardrailMetrics are the metrics a guardrail may name besides receipt ones.
var GuardrailMetrics = []string{MetricCost, MetricWallTime, MetricP95Latency, MetricPeakMemory, MetricEnergy, MetricFidelityKL}

// GuardrailUnit is the unit MaxAbsoluteIncrease is read in.
func GuardrailUnit(metric string) string {
	switch metric {
	case MetricCost, MetricWallTime:
		return "s"
	case MetricP95Latency:
		return "ms"
	case MetricPeakMemory:
		return "MiB"
	case MetricEnergy:
		return "Wh"
	case MetricFidelityKL:
		return "nats/token"
	}
	return "(the receipt field's unit)"
}

// WinnerPolicy is frozen with the design: a challenger the rule would switch
// to is blocked when it breaks any clause. Unset numeric clauses do not apply.
type WinnerPolicy struct {
	// MinPassRateDelta is the least the challenger's pass rate may lead the
	// incumbent's by, in every job kind the pair meets (0: no worse).
	MinPassRateDelta *float64 `json:"min_pass_rate_delta,omitempty"`
	// MaxCostIncrease is the most the challenger's cost (the rule's cost
	// measure) may exceed the incumbent's, as a fraction: 0.15 is 15%.
	MaxCostIncrease *float64 `json:"max_cost_increase,omitempty"`
	// MaxP95LatencyIncrease is the same for p95 latency.
	MaxP95LatencyIncrease *float64 `json:"max_p95_latency_increase,omitempty"`
	// AllowRegressions lets a winner have newly failing paired tasks (tasks
	// the incumbent passes and the challenger fails); left false, one blocks.
	AllowRegressions bool `json:"allow_regressions,omitempty"`
	// AllowIncomparableJudges lets a pair whose judges do not share a scale
	// stand; left false, such a pair blocks the winner.
	AllowIncomparableJudges bool `json:"allow_incomparable_judges,omitempty"`
}

// MaxGuardrails bounds the guardrails a design may list.
const MaxGuardrails = 32

func (v *validator) guardrails() {
	if n := len(v.d.Guardrails); n > MaxGuardrails {
		v.add(KindInvalid, "guardrails", "%d guardrails: at most %d (a guardrail is watched, not tested; keep the few that would make you say no)", n, MaxGuardrails)
	}
	seen := map[string]int{}
	for i, g := range v.d.Guardrails {
		p := fmt.Sprintf("guardrails[%d]", i)
		field, isReceipt := strings.CutPrefix(g.Metric, ReceiptMetricPrefix)
		switch {
		case isReceipt && !slices.Contains(ReceiptMetricFields, field):
			v.add(KindInvalid, p+".metric", "%q: name a numeric receipt field after %q: one of %s", g.Metric, ReceiptMetricPrefix, strings.Join(ReceiptMetricFields, ", "))
		case !isReceipt && !slices.Contains(GuardrailMetrics, g.Metric):
			v.add(KindInvalid, p+".metric", "%q: use one of %s, or \"receipt.FIELD\" for a numeric receipt field", g.Metric, strings.Join(GuardrailMetrics, ", "))
		}
		if j, dup := seen[g.Metric]; dup && g.Metric != "" {
			v.add(KindDuplicate, p+".metric", "%q is already guardrails[%d] (one guardrail per metric; keep the stricter)", g.Metric, j)
		}
		seen[g.Metric] = i
		switch {
		case isReceipt && g.Direction != "lower" && g.Direction != "higher":
			v.add(KindInvalid, p+".direction", "%q: a receipt metric needs \"lower\" or \"higher\" (which way is better), so rig knows which way is a degradation", g.Direction)
		case !isReceipt && g.Direction != "" && g.Direction != "lower":
			v.add(KindInvalid, p+".direction", "%q: %s is lower-is-better; leave direction out", g.Direction, g.Metric)
		}
		rel, abs := g.MaxRelativeIncrease, g.MaxAbsoluteIncrease
		switch {
		case (rel == nil) == (abs == nil):
			v.add(KindInvalid, p, "give exactly one of max_relative_increase (a fraction of the incumbent's value, e.g. 0.1 for 10%%) and max_absolute_increase (in %s)", GuardrailUnit(g.Metric))
		case rel != nil && !(*rel >= 0 && *rel <= MaxCostRatio):
			v.add(KindInvalid, p+".max_relative_increase", "%v: give a fraction from 0 (no degradation) to %d, e.g. 0.1 for 10%%", *rel, MaxCostRatio)
		case abs != nil && !(*abs >= 0 && *abs <= 1e12):
			v.add(KindInvalid, p+".max_absolute_increase", "%v: give a degradation of 0 or more, in %s", *abs, GuardrailUnit(g.Metric))
		}
		if g.Metric == MetricFidelityKL {
			v.fidelityGuardrail(p, g)
		}
	}
}

// fidelityGuardrail checks what only a fidelity_kl guardrail needs: an
// absolute limit, since the reference's own KL is zero and no fraction of
// zero allows a change, and a reference arm in every job kind, since the
// guardrail is judged on every pair of every job kind and one it cannot
// read blocks the winner.
func (v *validator) fidelityGuardrail(p string, g Guardrail) {
	if g.MaxRelativeIncrease != nil {
		v.add(KindInvalid, p+".max_relative_increase", "fidelity_kl takes max_absolute_increase in nats/token (e.g. 0.05): the reference's own mean KL is 0, so a fraction of it allows nothing")
	}
	for i, jk := range v.d.JobKinds {
		if jk.Reference == "" {
			v.add(KindInvalid, p+".metric", "fidelity_kl needs a reference arm in every job kind, and job_kinds[%d] (%q) names none: add \"reference\": \"ARM\" to it, or drop this guardrail", i, jk.Name)
		}
	}
}

// FidelityRankingMeasure names fidelity to the reference arm as a ranking
// measure: each pair of the job kind is judged on the paired difference in
// mean KL per token (lower is better) rather than on pass rates.
const FidelityRankingMeasure = MetricFidelityKL

// fidelityMeasure checks fidelity_kl as job kind jk's ranking measure: it
// is lower-is-better, needs the job kind's reference arm, and ranks only the
// other arms, since the reference is the yardstick (KL 0 from itself by
// construction): a pair naming it would be decided by construction, not by
// the study.
func (v *validator) fidelityMeasure(p string, jk JobKind) {
	if jk.RankingMeasure.Name != FidelityRankingMeasure {
		return
	}
	if jk.Reference == "" {
		v.add(KindInvalid, p+".ranking_measure.name", "%q measures fidelity to the job kind's reference arm, and %q names none: add \"reference\": \"ARM\" (an arm with the same tokenizer)", FidelityRankingMeasure, jk.Name)
		return
	}
	if jk.RankingMeasure.Direction != "lower" {
		v.add(KindInvalid, p+".ranking_measure.direction", "%q: %s is lower-is-better (mean KL per token to the reference); set \"direction\": \"lower\"", jk.RankingMeasure.Direction, FidelityRankingMeasure)
	}
	if v.d.Stopping != nil {
		// The monitor reads grades between blocks; fidelity is scored
		// only after the job kind's trials, so no look could read it.
		v.add(KindInvalid, "stopping", "job kind %q ranks by %s, which is scored after all its trials, so no look between blocks can read it: leave stopping out, or rank by pass_rate and hold fidelity as a guardrail", jk.Name, FidelityRankingMeasure)
	}
	for _, pr := range v.d.ResolvedPairs() {
		if pr.JobKind != jk.Name {
			continue
		}
		switch jk.Reference {
		case pr.Incumbent:
			v.add(KindInvalid, p+".reference", "%q is the incumbent of %s vs %s, and job kind %q ranks by %s: the reference is the yardstick (KL 0 by construction), so no challenger could do better; name another arm as reference, or make another arm the incumbent (or list pairs without it)", jk.Reference, pr.Challenger, pr.Incumbent, jk.Name, FidelityRankingMeasure)
		case pr.Challenger:
			v.add(KindInvalid, p+".reference", "%q is the challenger of %s vs %s, and job kind %q ranks by %s: the reference is the yardstick (KL 0 by construction), so it would lead by construction; name another arm as reference, or list pairs that leave it out", jk.Reference, pr.Challenger, pr.Incumbent, jk.Name, FidelityRankingMeasure)
		}
	}
}

func (v *validator) winnerPolicy() {
	w := v.d.WinnerPolicy
	if w == nil {
		return
	}
	if d := w.MinPassRateDelta; d != nil && !(*d >= -1 && *d <= 1) {
		v.add(KindInvalid, "winner_policy.min_pass_rate_delta", "%v: give a pass-rate difference from -1 to 1, e.g. 0 (no worse) or 0.05 (five points ahead)", *d)
	}
	for _, f := range []struct {
		path string
		val  *float64
	}{{"winner_policy.max_cost_increase", w.MaxCostIncrease}, {"winner_policy.max_p95_latency_increase", w.MaxP95LatencyIncrease}} {
		if f.val != nil && !(*f.val >= 0 && *f.val <= MaxCostRatio) {
			v.add(KindInvalid, f.path, "%v: give a fraction from 0 (no increase) to %d, e.g. 0.15 for 15%%", *f.val, MaxCostRatio)
		}
	}
}

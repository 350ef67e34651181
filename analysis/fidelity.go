package analysis

import (
	"fmt"
	"math"
)

// MetricFidelityKL is the guardrail on fidelity to a job kind's reference
// arm: the mean KL divergence per token of an arm's next-token
// distributions from the reference's, in nats (lower is closer). Package
// fidelity computes it from a study's fidelity records; the analysis reads
// only each pair's paired difference with its interval (Input.Fidelity),
// since fidelity imports this package and not the other way round.
const MetricFidelityKL = "fidelity_kl"

// FidelityKL is one pair's mean KL per token from the job kind's reference,
// each arm's and the candidate's less the baseline's paired by task, with
// the difference's bootstrap interval over tasks.
type FidelityKL struct {
	JobKind        string   `json:"job_kind"`
	Candidate      string   `json:"candidate"`
	Baseline       string   `json:"baseline"`
	CandidateValue Num      `json:"candidate_value"`
	BaselineValue  Num      `json:"baseline_value"`
	Delta          Num      `json:"delta"`
	Interval       Interval `json:"interval"`
}

// fidelityOf is the pair's fidelity figures in the job kind, if measured.
func fidelityOf(fs []FidelityKL, kind, candidate, baseline string) (FidelityKL, bool) {
	for _, f := range fs {
		if f.JobKind == kind && f.Candidate == candidate && f.Baseline == baseline {
			return f, true
		}
	}
	return FidelityKL{}, false
}

// fidelityCheck judges a fidelity_kl guardrail on the pair's paired
// difference: it holds only when the whole interval of the candidate's extra
// mean KL is within the limit, so a difference the study cannot bound below
// the limit blocks, as a guardrail that cannot be read cannot clear a
// winner.
func fidelityCheck(f FidelityKL, found bool, limit float64) (bool, string) {
	if !found || !f.Delta.Valid() || !f.Interval.Hi.Valid() {
		return true, "not measured (no fidelity records pair these arms by task): a guardrail that cannot be read cannot clear a winner"
	}
	hi := float64(f.Interval.Hi)
	blocks := hi > limit
	verdict := "its upper bound within the limit of"
	if blocks {
		verdict = "its upper bound over the limit of"
	}
	return blocks, fmt.Sprintf("mean KL %s vs %s nats/token, difference %s [%s, %s] (%s, by task), %s %.4g",
		fmtNum(float64(f.CandidateValue)), fmtNum(float64(f.BaselineValue)), signed4(float64(f.Delta)), signed4(float64(f.Interval.Lo)), signed4(hi), f.Interval.Method, verdict, limit)
}

// signed4 is a KL difference with its sign, four significant digits.
func signed4(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return fmt.Sprintf("%+.4g", v)
}

// rankByFidelity makes the pair's fidelity figures its primary comparison,
// for a job kind ranked by fidelity: the paired difference in mean KL per
// token (candidate − baseline) with its bootstrap interval over tasks, as
// package fidelity computed it once for the report and the guardrail. The
// pass comparison's newly fixed and failing tasks stay (the winner policy
// reads them), and so does its p-value, in Holm's family as before, shown
// beside as the pass rates are: it decides nothing here. Its detectable
// lead, in pass points, does not stay.
func (pr *PairResult) rankByFidelity(fs []FidelityKL) {
	pr.byFidelity = true
	pr.MinDetectable = Num(math.NaN())
	pr.direction = 0
	f, ok := fidelityOf(fs, pr.JobKind, pr.Candidate, pr.Baseline)
	if !ok || !f.Delta.Valid() || !f.Interval.Lo.Valid() || !f.Interval.Hi.Valid() {
		// Nothing to decide on: the pass comparison stays in view, said to
		// be the pass rates', and the pair cannot lead (classifyFidelity).
		pr.Test = "fidelity not measured for this pair (no fidelity records pair it by task), so it cannot lead; the difference and p are the pass rates' " + pr.Test + ", shown beside"
		return
	}
	pr.Test = "the paired bootstrap over tasks of the mean KL per token from the reference decides (lower is better); p is the pass rates' " + pr.Test + ", shown beside"
	pr.fidelityRead = true
	pr.Delta, pr.Interval = f.Delta, f.Interval
	// Lower is better: the candidate leads only when the whole interval
	// is below zero, and trails only when it is wholly above.
	switch {
	case float64(f.Interval.Hi) < 0:
		pr.direction = 1
	case float64(f.Interval.Lo) > 0:
		pr.direction = -1
	}
}

// classifyFidelity is classify for a pair judged on fidelity: its interval
// at the design's level decides, and the cost factor makes a tradeoff as
// for any measure.
func classifyFidelity(p *PairResult, costFactor float64) {
	if !p.fidelityRead {
		p.Outcome, p.Reason = Inconclusive, "fidelity not measured: no fidelity records pair these arms by task, so the job kind's ranking measure (mean KL to the reference) cannot be read"
		return
	}
	cost := float64(p.CostRatio)
	iv := fmt.Sprintf("mean KL difference %s nats/token [%s, %s]", signed4(float64(p.Delta)), signed4(float64(p.Interval.Lo)), signed4(float64(p.Interval.Hi)))
	switch {
	case p.direction > 0 && cost > costFactor:
		p.Outcome, p.Reason = Tradeoff, fmt.Sprintf("closer to the reference (%s, wholly below 0) but %.2f× the baseline's cost, beyond the %.2f× factor", iv, cost, costFactor)
	case p.direction > 0:
		p.Outcome, p.Reason = Improvement, fmt.Sprintf("closer to the reference (%s, wholly below 0)", iv)
	case p.direction < 0 && cost < 1/costFactor:
		p.Outcome, p.Reason = Tradeoff, fmt.Sprintf("further from the reference (%s, wholly above 0) but %.2f× the baseline's cost, cheaper beyond the %.2f× factor", iv, cost, costFactor)
	case p.direction < 0:
		p.Outcome, p.Reason = Regression, fmt.Sprintf("further from the reference (%s, wholly above 0)", iv)
	default:
		p.Outcome, p.Reason = Inconclusive, fmt.Sprintf("difference in closeness to the reference not shown (%s spans 0); not shown is not equal", iv)
	}
}

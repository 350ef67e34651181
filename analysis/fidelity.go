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

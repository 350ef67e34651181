package report

import (
	"fmt"
	"math"

	"rig/internal/wording"
)

// Fidelity is a job kind's fidelity to its reference arm (docs/fidelity.md):
// each arm's next-token distributions compared with the reference's on the
// reference's kept output for every task. It measures closeness to the
// reference model, not correctness, and is shown beside the pass rates.
type Fidelity struct {
	// Reference is the arm whose kept outputs were scored, and whose
	// distributions the others are compared with.
	Reference string `json:"reference"`
	// Level is the intervals' confidence level, e.g. 0.95; Seed seeded
	// their bootstrap (the analysis seed), so the same records give the
	// same intervals.
	Level float64 `json:"level"`
	Seed  uint64  `json:"seed"`
	// Arms are the arms scored against the reference, in the design's
	// order (a card sub-study's cells each with their profile).
	Arms []FidelityArm `json:"arms"`
	// Pairs are the named pairs with both sides scored (or the reference
	// as the baseline), challenger less baseline paired by task.
	Pairs []FidelityPair `json:"pairs,omitempty"`
	// Notes say what could not be computed, and why.
	Notes []string `json:"notes,omitempty"`
}

// FidelityArm is one arm's fidelity to the reference.
type FidelityArm struct {
	Arm string `json:"arm"`
	// Profile is the card sub-study profile the arm ran at ("" outside one).
	Profile string `json:"profile,omitempty"`
	// ScoredBy is "stack" (the arm's own GGUF through the pinned llama.cpp
	// scorer, its runtime's build) or "model" (its runtime cannot score
	// given tokens, so the figure is its model's, not its runtime's).
	ScoredBy string `json:"scored_by"`
	Tasks    int    `json:"tasks"`
	Tokens   int    `json:"tokens"`
	// MeanKL is the mean over tasks of each task's mean KL per token, in
	// nats; P99KL the 99th percentile over every scored token;
	// TopAgreement the mean over tasks of the share of tokens whose top
	// token is the reference's.
	MeanKL       Interval `json:"mean_kl"`
	P99KL        Interval `json:"p99_kl"`
	TopAgreement Interval `json:"top_agreement"`
	// RefTokenProb is the mean probability the arm gives the reference's
	// next token.
	RefTokenProb float64 `json:"ref_token_prob"`
	// PassRate is the arm's pass rate in the job kind, to read beside; nil
	// when the arm is not ranked there.
	PassRate *float64 `json:"pass_rate,omitempty"`
}

// FidelityPair is a named pair's paired difference, challenger less
// baseline, task by task.
type FidelityPair struct {
	Challenger   string   `json:"challenger"`
	Baseline     string   `json:"baseline"`
	MeanKL       Interval `json:"mean_kl"`
	P99KL        Interval `json:"p99_kl"`
	TopAgreement Interval `json:"top_agreement"`
}

// ScoredByModel is FidelityArm.ScoredBy for an arm whose runtime cannot
// score given tokens.
const ScoredByModel = "model"

// ModelLabel is said of every arm scored by model, in every renderer.
const ModelLabel = "the model's fidelity, scored on its GGUF through the pinned llama.cpp; not the runtime's"

// Heading is the section's title.
func (f Fidelity) Heading() string { return "Fidelity to " + f.Reference }

// Words are the section's plain words: what it measures, what not, how its
// intervals were made, and what to read it beside.
func (f Fidelity) Words() []string {
	return []string{
		fmt.Sprintf("Each arm's next-token distributions are compared with %s's on %s's kept output for each task: the KL divergence from %s in nats per token (lower is closer), its 99th percentile over every scored token, how often the two models' top tokens agree, and the mean probability the arm gives %s's next token.",
			f.Reference, f.Reference, f.Reference, f.Reference),
		"It measures closeness to the reference model, not correctness: an arm can drift from the reference and answer better, or stay close and answer as badly. Read it beside the pass rates, shown in the last column.",
		fmt.Sprintf("Intervals: %s, by bootstrap over tasks, the method named beside each (the 99th percentile's resamples pool their tasks' tokens), seeded with the analysis seed %d.", levelText(f.Level), f.Seed),
	}
}

// PairWords introduce the paired differences.
func (f Fidelity) PairWords() string {
	return fmt.Sprintf("Each named pair, challenger less baseline, paired by task. Against %s itself the difference's estimate is the challenger's own figure, since the reference's KL from itself is 0 and its top token always agrees.", f.Reference)
}

// Label is the arm's name as the table shows it, said to be the model's
// when its runtime could not score.
func (a FidelityArm) Label() string {
	s := a.Arm
	if a.ScoredBy == ScoredByModel {
		s += " (" + ModelLabel + ")"
	}
	return s
}

// PassRateText is the arm's pass rate, or Missing when it is not ranked.
func (a FidelityArm) PassRateText() string {
	if a.PassRate == nil {
		return Missing
	}
	return pct(*a.PassRate)
}

func levelText(level float64) string {
	return fmt.Sprintf("%g%%", math.Round(1000*level)/10)
}

// klValue is a KL figure: four decimals, since a quant's mean KL is often
// below 0.01 nats/token, where wording.Value's three would read 0.005.
func klValue(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Missing
	}
	return fmt.Sprintf("%.4f", v)
}

func klSigned(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Missing
	}
	return fmt.Sprintf("%+.4f", v)
}

// klText is a KL figure with its interval and method.
func klText(iv Interval) string {
	return fmt.Sprintf("%s [%s, %s]", klValue(iv.Value), klValue(iv.Low), klValue(iv.High)) + methodSuffix(iv)
}

// klDeltaText is a KL difference with its interval and method.
func klDeltaText(iv Interval) string {
	return fmt.Sprintf("%s [%s, %s]", klSigned(iv.Value), klSigned(iv.Low), klSigned(iv.High)) + methodSuffix(iv)
}

// shareText is a share (top-token agreement) with its interval, as
// percentages.
func shareText(iv Interval) string {
	return fmt.Sprintf("%s [%s, %s]", pct(iv.Value), pct(iv.Low), pct(iv.High)) + methodSuffix(iv)
}

// shareDeltaText is a difference of shares in percentage points.
func shareDeltaText(iv Interval) string {
	pp := func(v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Missing
		}
		return fmt.Sprintf("%+.1f pp", 100*v)
	}
	return fmt.Sprintf("%s [%s, %s]", pp(iv.Value), pp(iv.Low), pp(iv.High)) + methodSuffix(iv)
}

// probText is a mean probability: three decimals.
func probText(v float64) string { return wording.Value(v) }

// FidelityText is a card cell's fidelity: its mean KL with interval,
// "reference" for the cell the others are held to, or Missing when the
// cell was not scored.
func (r CardRow) FidelityText() string {
	if r.FidelityReference {
		return "reference"
	}
	if r.Fidelity == nil {
		return Missing
	}
	return klText(*r.Fidelity)
}

// Profiles says whether any arm ran at a card profile: the table then has
// a profile column.
func (f Fidelity) Profiles() bool {
	for _, a := range f.Arms {
		if a.Profile != "" {
			return true
		}
	}
	return false
}

// FidelityColumn says whether any card cell was scored: the card table then
// has a fidelity column, and a study without records keeps its table.
func (c Cards) FidelityColumn() bool {
	for _, r := range c.Rows {
		if r.Fidelity != nil || r.FidelityReference {
			return true
		}
	}
	return false
}

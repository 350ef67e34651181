package analysis

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Guardrail metrics the analysis measures itself; all are lower-is-better.
// A metric "receipt.FIELD" reads Trial.Metrics[FIELD].
const (
	MetricCost       = "cost"        // the design's cost measure (Cost.value)
	MetricWallTime   = "wall_time"   // mean wall seconds per scored trial
	MetricP95Latency = "p95_latency" // p95 of wall time per scored trial, ms
	MetricPeakMemory = "peak_memory" // largest peak memory, MiB
	MetricEnergy     = "energy"      // mean energy per scored trial, Wh
	ReceiptPrefix    = "receipt."
)

// Guardrail is a metric that may block a winner and never makes one.
// Exactly one of MaxRelative and MaxAbsolute is set.
type Guardrail struct {
	Metric         string   `json:"metric"`
	HigherIsBetter bool     `json:"higher_is_better,omitempty"`
	MaxRelative    *float64 `json:"max_relative,omitempty"`
	MaxAbsolute    *float64 `json:"max_absolute,omitempty"`
}

// WinnerPolicy is what a winner must also meet; see Design.Policy.
type WinnerPolicy struct {
	MinPassRateDelta        *float64 `json:"min_pass_rate_delta,omitempty"`
	MaxCostIncrease         *float64 `json:"max_cost_increase,omitempty"`
	MaxP95LatencyIncrease   *float64 `json:"max_p95_latency_increase,omitempty"`
	AllowRegressions        bool     `json:"allow_regressions,omitempty"`
	AllowIncomparableJudges bool     `json:"allow_incomparable_judges,omitempty"`
}

// Constraint is one guardrail or winner-policy clause judged on one pair in one
// job kind. Clause names it as the design file does ("guardrails[0]",
// "winner_policy.max_cost_increase") so a reader can find it there.
type Constraint struct {
	Clause         string `json:"clause"`
	Metric         string `json:"metric"`
	JobKind        string `json:"job_kind"`
	Candidate      string `json:"candidate"`
	Baseline       string `json:"baseline"`
	CandidateValue Num    `json:"candidate_value"`
	BaselineValue  Num    `json:"baseline_value"`
	Limit          string `json:"limit"`
	// Blocks is true when the clause stops the candidate from being switched
	// to; Reading says why, or why not, with the figures.
	Blocks  bool   `json:"blocks"`
	Reading string `json:"reading"`
}

func (c Constraint) String() string {
	verdict := "holds"
	if c.Blocks {
		verdict = "blocks"
	}
	return fmt.Sprintf("%s (%s) in %s, %s vs %s: %s, limit %s → %s", c.Clause, c.Metric, c.JobKind, c.Candidate, c.Baseline, c.Reading, c.Limit, verdict)
}

// ReceiptFields are the receipt's numeric measurements, by their JSON
// names, that a "receipt.FIELD" guardrail may read (identifiers such as
// the repeat or the attempt are not measurements). analysis imports no
// receipts package, so report/findings' test holds this list to the
// receipt's own fields.
var ReceiptFields = []string{"input_tokens", "thinking_tokens", "output_tokens", "prompt_tok_s", "output_tok_s",
	"ttft_ms", "tpot_ms", "wall_ms", "peak_memory_bytes", "peak_gpu_memory_bytes", "energy_joules"}

func (g Guardrail) validate(f string) error {
	known := []string{MetricCost, MetricWallTime, MetricP95Latency, MetricPeakMemory, MetricEnergy, MetricFidelityKL}
	if field, ok := strings.CutPrefix(g.Metric, ReceiptPrefix); ok && !slices.Contains(ReceiptFields, field) {
		return &FieldError{Field: f + ".metric", Problem: fmt.Sprintf("%q is not a numeric receipt field", g.Metric), Fix: "use receipt." + strings.Join(ReceiptFields, ", receipt.")}
	} else if !ok && !slices.Contains(known, g.Metric) {
		return &FieldError{Field: f + ".metric", Problem: fmt.Sprintf("%q is not a metric", g.Metric), Fix: "use " + strings.Join(known, ", ") + " or receipt.FIELD"}
	}
	rel, abs := g.MaxRelative, g.MaxAbsolute
	switch {
	case (rel == nil) == (abs == nil):
		return &FieldError{Field: f, Problem: "needs exactly one limit", Fix: "set maxRelative or maxAbsolute"}
	case g.Metric == MetricFidelityKL && (rel != nil || g.HigherIsBetter):
		// The reference's own KL is zero, so a fraction of a baseline's
		// value would forbid any change against the reference itself.
		return &FieldError{Field: f, Problem: "fidelity_kl takes an absolute limit in nats/token, lower is better", Fix: "set maxAbsolute, e.g. 0.05"}
	case rel != nil && !(*rel >= 0):
		return &FieldError{Field: f + ".max_relative", Problem: fmt.Sprintf("%v is negative", *rel), Fix: "a degradation of 0 or more"}
	case abs != nil && !(*abs >= 0):
		return &FieldError{Field: f + ".max_absolute", Problem: fmt.Sprintf("%v is negative", *abs), Fix: "a degradation of 0 or more"}
	}
	return nil
}

// metric is an arm's value of a guardrail metric over the scored trials of
// one job kind; NaN when nothing measured it.
func metric(d Design, trials []Trial, arm, kind, name string) float64 {
	c := costOf(trials, arm, kind)
	switch name {
	case MetricCost:
		return c.value(d.CostMeasure)
	case MetricWallTime:
		return float64(c.MeanWallSeconds)
	case MetricP95Latency:
		return latencyMS(trials, arm, kind, 0.95)
	case MetricPeakMemory:
		if c.PeakMemoryBytes == 0 {
			return math.NaN()
		}
		return float64(c.PeakMemoryBytes) / (1 << 20)
	case MetricEnergy:
		return float64(c.MeanEnergyJoules) / 3600
	}
	field := strings.TrimPrefix(name, ReceiptPrefix)
	var sum float64
	var n int
	for _, t := range trials {
		if v, ok := t.Metrics[field]; ok && scoredTrial(t, arm, kind) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

func scoredTrial(t Trial, arm, kind string) bool {
	return t.Arm == arm && t.JobKind == kind && !t.Missing && !t.Preempted
}

// latencyMS is the type-7 quantile p of the arm's wall time per scored
// trial in the job kind, in milliseconds; NaN with no timed trial.
func latencyMS(trials []Trial, arm, kind string, p float64) float64 {
	var ms []float64
	for _, t := range trials {
		if scoredTrial(t, arm, kind) && t.WallSeconds > 0 {
			ms = append(ms, t.WallSeconds*1000)
		}
	}
	sort.Float64s(ms)
	return quantile(ms, p)
}

// constraints judges every guardrail and winner-policy clause on every pair the
// report tested. It needs the report's pairs (classified) and rankings.
func constraints(d Design, trials []Trial, fid []FidelityKL, rep *Report) []Constraint {
	var out []Constraint
	for _, p := range rep.Pairs {
		base := Constraint{JobKind: p.JobKind, Candidate: p.Candidate, Baseline: p.Baseline}
		out = append(out, guardrailConstraints(d, trials, fid, p, base)...)
		pol := d.Policy
		if pol == nil {
			continue
		}
		out = append(out, policyConstraints(d, trials, rep, p, base, pol)...)
	}
	return out
}

// guardrailConstraints checks the pair against each of the design's
// guardrails.
func guardrailConstraints(d Design, trials []Trial, fid []FidelityKL, p PairResult, base Constraint) []Constraint {
	var out []Constraint
	for i, g := range d.Guardrails {
		c := base
		c.Clause, c.Metric = fmt.Sprintf("guardrails[%d]", i), g.Metric
		if g.Metric == MetricFidelityKL {
			// Judged on the paired difference's interval, not on two point
			// values: fidelity has one per task to pair on.
			f, found := fidelityOf(fid, p.JobKind, p.Candidate, p.Baseline)
			c.CandidateValue, c.BaselineValue = f.CandidateValue, f.BaselineValue
			if !found {
				c.CandidateValue, c.BaselineValue = Num(math.NaN()), Num(math.NaN())
			}
			c.Limit = fmt.Sprintf("at most %+.4g nats/token more mean KL (upper bound)", *g.MaxAbsolute)
			c.Blocks, c.Reading = fidelityCheck(f, found, *g.MaxAbsolute)
			out = append(out, c)
			continue
		}
		cv, bv := metric(d, trials, p.Candidate, p.JobKind, g.Metric), metric(d, trials, p.Baseline, p.JobKind, g.Metric)
		c.CandidateValue, c.BaselineValue = Num(cv), Num(bv)
		worse := cv - bv
		if g.HigherIsBetter {
			worse = bv - cv
		}
		words := directionOf(g.Metric, g.HigherIsBetter)
		if g.MaxRelative != nil {
			c.Limit = fmt.Sprintf("at most %+.1f%% worse", 100**g.MaxRelative)
			c.Blocks, c.Reading = relativeCheck(cv, bv, worse, *g.MaxRelative, words)
		} else {
			c.Limit = fmt.Sprintf("at most %+.4g worse", *g.MaxAbsolute)
			c.Blocks, c.Reading = absoluteCheck(cv, bv, worse, *g.MaxAbsolute, words)
		}
		out = append(out, c)
	}
	return out
}

// policyConstraints checks the pair against the winner policy: its
// pass-rate, cost and latency limits where set, then new regressions and
// comparable judges always.
func policyConstraints(d Design, trials []Trial, rep *Report, p PairResult, base Constraint, pol *WinnerPolicy) []Constraint {
	var out []Constraint
	if pol.MinPassRateDelta != nil {
		c := base
		c.Clause, c.Metric, c.Limit = "winner_policy.min_pass_rate_delta", "pass_rate", fmt.Sprintf("lead of at least %+.3f", *pol.MinPassRateDelta)
		cv, bv := rep.passRate(p.JobKind, p.Candidate), rep.passRate(p.JobKind, p.Baseline)
		c.CandidateValue, c.BaselineValue = Num(cv), Num(bv)
		switch delta := cv - bv; {
		case math.IsNaN(delta):
			c.Blocks, c.Reading = true, "pass rate not measured for both arms"
		default:
			c.Blocks = delta < *pol.MinPassRateDelta
			c.Reading = fmt.Sprintf("pass rate %.3f vs %.3f, delta %+.3f", cv, bv, delta)
		}
		out = append(out, c)
	}
	if pol.MaxCostIncrease != nil {
		c := base
		c.Clause, c.Metric = "winner_policy.max_cost_increase", MetricCost
		cv, bv := metric(d, trials, p.Candidate, p.JobKind, MetricCost), metric(d, trials, p.Baseline, p.JobKind, MetricCost)
		c.CandidateValue, c.BaselineValue = Num(cv), Num(bv)
		c.Limit = fmt.Sprintf("at most %+.1f%%", 100**pol.MaxCostIncrease)
		c.Blocks, c.Reading = relativeCheck(cv, bv, cv-bv, *pol.MaxCostIncrease, directionOf(MetricCost, false))
		out = append(out, c)
	}
	if pol.MaxP95LatencyIncrease != nil {
		c := base
		c.Clause, c.Metric = "winner_policy.max_p95_latency_increase", MetricP95Latency
		cv, bv := latencyMS(trials, p.Candidate, p.JobKind, 0.95), latencyMS(trials, p.Baseline, p.JobKind, 0.95)
		c.CandidateValue, c.BaselineValue = Num(cv), Num(bv)
		c.Limit = fmt.Sprintf("at most %+.1f%%", 100**pol.MaxP95LatencyIncrease)
		c.Blocks, c.Reading = relativeCheck(cv, bv, cv-bv, *pol.MaxP95LatencyIncrease, directionOf(MetricP95Latency, false))
		out = append(out, c)
	}
	c := base
	c.Clause, c.Metric, c.CandidateValue, c.BaselineValue = "winner_policy.allow_regressions", "newly_failing", Num(len(p.NewlyFailing)), Num(math.NaN())
	c.Limit = "no newly failing paired task"
	if pol.AllowRegressions {
		c.Limit = "allowed"
	}
	c.Blocks = len(p.NewlyFailing) > 0 && !pol.AllowRegressions
	c.Reading = fmt.Sprintf("%d newly failing paired tasks", len(p.NewlyFailing))
	if len(p.NewlyFailing) > 0 {
		c.Reading += " (" + listTasks(p.NewlyFailing) + ")"
	}
	out = append(out, c)
	c = base
	c.Clause, c.Metric, c.CandidateValue, c.BaselineValue = "winner_policy.allow_incomparable_judges", "judge_scale", Num(math.NaN()), Num(math.NaN())
	c.Limit = "judges share a scale"
	if pol.AllowIncomparableJudges {
		c.Limit = "allowed"
	}
	c.Reading = "the arms' judges and calibrations are the same"
	if p.notComparable != "" {
		c.Reading = p.notComparable
		c.Blocks = !pol.AllowIncomparableJudges
	}
	out = append(out, c)
	return out
}

// direction is the words a reading moves in: better and worse as the
// metric's own terms say them ("faster", "slower"), so a reading never
// needs a sign the reader must turn around (issue 46: an arm 15.5% faster
// was read "-15.5% worse").
type direction struct{ better, worse string }

// speedMetrics are those where better means faster: times (lower is better)
// and rates (higher is better).
var speedMetrics = map[string]bool{
	MetricWallTime: false, MetricP95Latency: false,
	ReceiptPrefix + "ttft_ms": false, ReceiptPrefix + "tpot_ms": false, ReceiptPrefix + "wall_ms": false,
	ReceiptPrefix + "prompt_tok_s": true, ReceiptPrefix + "output_tok_s": true,
}

// directionOf words a metric's moves given which way is better. A speed
// metric read the way its kind reads (a time lower, a rate higher) says
// faster and slower, cost says cheaper and costlier; anything else, or a
// metric the design turns around, says the plain direction and whether it
// is the better one, which is true whatever the metric.
func directionOf(metric string, higherIsBetter bool) direction {
	if rate, ok := speedMetrics[metric]; ok && rate == higherIsBetter {
		return direction{"faster", "slower"}
	}
	if metric == MetricCost && !higherIsBetter {
		return direction{"cheaper", "costlier"}
	}
	if higherIsBetter {
		return direction{"higher (better)", "lower (worse)"}
	}
	return direction{"lower (better)", "higher (worse)"}
}

// move words a change by its size and direction: worse is how much worse
// the candidate is (negative when better), shown as given by size.
func (d direction) move(worse float64, size string) string {
	switch {
	case worse > 0:
		return size + " " + d.worse
	case worse < 0:
		return size + " " + d.better
	}
	return "no change"
}

// relativeCheck blocks when worse, as a fraction of the baseline's value,
// is above limit; a value not measured for either arm blocks too, since a
// guardrail that cannot be read cannot clear a winner.
func relativeCheck(cv, bv, worse, limit float64, d direction) (bool, string) {
	switch {
	case math.IsNaN(cv) || math.IsNaN(bv):
		return true, fmt.Sprintf("not measured (candidate %s, baseline %s): a guardrail that cannot be read cannot clear a winner", fmtNum(cv), fmtNum(bv))
	case bv == 0:
		if worse <= 0 {
			return false, fmt.Sprintf("%s vs %s: no worse", fmtNum(cv), fmtNum(bv))
		}
		return true, fmt.Sprintf("%s vs %s: %s than a baseline of zero, which no fraction allows", fmtNum(cv), fmtNum(bv), d.worse)
	}
	rel := worse / math.Abs(bv)
	blocks := rel > limit
	return blocks, fmt.Sprintf("%s vs %s, %s, %s %.1f%%", fmtNum(cv), fmtNum(bv), d.move(rel, fmt.Sprintf("%.1f%%", 100*math.Abs(rel))), against(blocks), 100*limit)
}

func absoluteCheck(cv, bv, worse, limit float64, d direction) (bool, string) {
	if math.IsNaN(cv) || math.IsNaN(bv) {
		return true, fmt.Sprintf("not measured (candidate %s, baseline %s): a guardrail that cannot be read cannot clear a winner", fmtNum(cv), fmtNum(bv))
	}
	blocks := worse > limit
	return blocks, fmt.Sprintf("%s vs %s, %s, %s %.4g", fmtNum(cv), fmtNum(bv), d.move(worse, fmt.Sprintf("%.4g", math.Abs(worse))), against(blocks), limit)
}

// against says where a reading stands against its limit.
func against(blocks bool) string {
	if blocks {
		return "over the limit of"
	}
	return "within the limit of"
}

func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return fmt.Sprintf("%.4g", v)
}

func (r *Report) passRate(kind, arm string) float64 {
	for _, k := range r.Kinds {
		if k.JobKind != kind {
			continue
		}
		for _, a := range k.Arms {
			if a.Arm == arm {
				return float64(a.PassRate)
			}
		}
	}
	return math.NaN()
}

// blocking lists the checks that block arm from being switched to.
func (r *Report) blocking(arm string) []Constraint {
	var out []Constraint
	for _, c := range r.Constraints {
		if c.Candidate == arm && c.Blocks {
			out = append(out, c)
		}
	}
	return out
}

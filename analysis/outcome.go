package analysis

import (
	"fmt"
	"math"
)

// Outcome classifies a candidate against its baseline in one job kind.
type Outcome string

const (
	Improvement   Outcome = "improvement"    // better, shown after Holm, cost within the factor
	Regression    Outcome = "regression"     // worse, shown after Holm, and not cheaper by the factor
	Tradeoff      Outcome = "tradeoff"       // better but costlier beyond the factor, or worse but cheaper beyond it
	Tie           Outcome = "tie"            // complete paired data and no task differs
	Inconclusive  Outcome = "inconclusive"   // data missing, nothing measured (no signal), or the difference is not shown
	NotComparable Outcome = "not_comparable" // judge or calibration identities differ
)

var outcomes = map[Outcome]bool{Improvement: true, Regression: true, Tradeoff: true, Tie: true, Inconclusive: true, NotComparable: true}

// classify assigns the pair's outcome from its test, data completeness and
// cost; it also writes the reason a reader sees.
func classify(p *PairResult, alpha, costFactor float64) {
	switch {
	case p.notComparable != "":
		p.Outcome, p.Reason = NotComparable, p.notComparable
		return
	case p.Tasks == 0:
		p.Outcome, p.Reason = Inconclusive, "no task has a result for both arms"
		return
	case p.MissingTasks > 0:
		p.Outcome, p.Reason = Inconclusive, fmt.Sprintf("%d tasks lack a result for one of the arms; required paired data is missing", p.MissingTasks)
		return
	case p.byFidelity:
		// Pass rates agreeing say nothing of the distributions: the
		// fidelity interval decides, whatever the pass table shows.
		classifyFidelity(p, costFactor)
		return
	case p.allEqual && p.constant:
		// Not a tie: nothing was measured. A rule that takes the cheaper
		// arm on a tie must not take it when both arms failed everything,
		// and the job kind reads "no signal, not a tie" (issue 46).
		p.Outcome, p.Reason = Inconclusive, fmt.Sprintf("no signal: both arms scored %.3g on every one of the %d paired tasks, so nothing was measured; this is no evidence that they are equal", p.constantValue, p.Tasks)
		return
	case p.allEqual:
		p.Outcome, p.Reason = Tie, fmt.Sprintf("all %d paired tasks have the same value for both arms", p.Tasks)
		return
	}
	cost := float64(p.CostRatio)
	costNote := ""
	if !p.CostRatio.Valid() {
		costNote = "; cost ratio unknown, so cost cannot make it a tradeoff"
	}
	if float64(p.PHolm) <= alpha {
		if p.direction > 0 {
			if cost > costFactor {
				p.Outcome, p.Reason = Tradeoff, fmt.Sprintf("better (Holm p %.3g ≤ %.3g) but %.2f× the baseline's cost, beyond the %.2f× factor", float64(p.PHolm), alpha, cost, costFactor)
				return
			}
			p.Outcome, p.Reason = Improvement, fmt.Sprintf("better (Holm p %.3g ≤ %.3g)%s", float64(p.PHolm), alpha, costNote)
			return
		}
		if cost < 1/costFactor {
			p.Outcome, p.Reason = Tradeoff, fmt.Sprintf("worse (Holm p %.3g ≤ %.3g) but %.2f× the baseline's cost, cheaper beyond the %.2f× factor", float64(p.PHolm), alpha, cost, costFactor)
			return
		}
		p.Outcome, p.Reason = Regression, fmt.Sprintf("worse (Holm p %.3g ≤ %.3g)%s", float64(p.PHolm), alpha, costNote)
		return
	}
	p.Outcome = Inconclusive
	p.Reason = fmt.Sprintf("difference not shown (Holm p %.3g > %.3g); not shown is not equal", float64(p.PHolm), alpha)
	if p.MinDetectable.Valid() && math.Abs(float64(p.Delta)) < float64(p.MinDetectable) {
		p.Reason += fmt.Sprintf("; %d tasks can only detect %.1f points at 80%% power", p.Tasks, 100*float64(p.MinDetectable))
	}
}

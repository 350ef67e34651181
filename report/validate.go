package report

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

// ErrInvalid is wrapped by every error Validate returns, so a caller can
// tell a malformed report input from a failed write.
var ErrInvalid = errors.New("report data invalid")

// Outcomes are the outcome classes a named pair can have.
var outcomes = []string{"improvement", "regression", "tradeoff", "tie", "inconclusive", "not_comparable"}

// Validate checks that the data is internally consistent: every arm a pair,
// paired row, failure, sweep line or cost point names is an arm of its job
// kind, sweeps have one pass rate per gate, and numbers are finite. The
// renderers call it first, because a report that silently drops a row is
// worse than no report.
func (d Data) Validate() error {
	var p problems
	if d.Study == "" {
		p.bad("study", "empty (name the study the report is for)")
	}
	for i, k := range d.Kinds {
		p.checkKind(fmt.Sprintf("kinds[%d]", i), k)
	}
	if r := d.Replay; r != nil {
		for j, row := range r.Rows {
			switch row.Status {
			case Reproduced, Mismatch, StackDiffers:
			default:
				p.bad(fmt.Sprintf("replay.rows[%d].status", j), "%q is not one of %q, %q, %q", row.Status, Reproduced, Mismatch, StackDiffers)
			}
		}
	}
	return errors.Join(p...)
}

// problems are what Validate found, in the order it found them.
type problems []error

// bad adds a problem with field, each wrapping ErrInvalid.
func (p *problems) bad(field, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...)))
}

// checkKind checks one job kind, at field path at: its arm rows, and that
// every other part names only those arms.
func (p *problems) checkKind(at string, k Kind) {
	if k.Name == "" {
		p.bad(at+".name", "empty (name the job kind)")
	}
	arms := p.checkArmRows(at, k)
	known := func(field, arm string) {
		if !arms[arm] {
			p.bad(field, "%q is not an arm of job kind %q (arms are %v)", arm, k.Name, armNames(k))
		}
	}
	p.checkPairs(at, k, known)
	if s := k.Sweep; s != nil {
		for j, l := range s.Lines {
			f := fmt.Sprintf("%s.sweep.lines[%d]", at, j)
			known(f+".arm", l.Arm)
			if len(l.PassRate) != len(s.Gates) {
				p.bad(f+".pass_rate", "%d values for %d gates (give one pass rate per gate)", len(l.PassRate), len(s.Gates))
			}
		}
	}
	for j, r := range k.Paired {
		f := fmt.Sprintf("%s.paired[%d]", at, j)
		known(f+".challenger", r.Challenger)
		known(f+".baseline", r.Baseline)
		if r.Change != NewlyFailing && r.Change != NewlyFixed {
			p.bad(f+".change", "%q is neither %q nor %q", r.Change, NewlyFailing, NewlyFixed)
		}
	}
	for j, fl := range k.Failures {
		known(fmt.Sprintf("%s.failures[%d].arm", at, j), fl.Arm)
	}
	for j, l := range k.Latency {
		known(fmt.Sprintf("%s.latency[%d].arm", at, j), l.Arm)
	}
	for j, sp := range k.Speed {
		known(fmt.Sprintf("%s.speed[%d].arm", at, j), sp.Arm)
	}
	if s := k.SRM; s != nil {
		for j, a := range s.Arms {
			known(fmt.Sprintf("%s.srm.arms[%d]", at, j), a)
		}
		if len(s.Planned) != len(s.Arms) || len(s.Scored) != len(s.Arms) {
			p.bad(at+".srm", "%d arms, %d planned and %d scored counts (give one of each per arm)", len(s.Arms), len(s.Planned), len(s.Scored))
		}
	}
	p.checkScores(at, k, known)
	if f := k.Fidelity; f != nil {
		p.checkFidelity(at+".fidelity", *f)
	}
	if c := k.Cost; c != nil {
		for j, pt := range c.Points {
			f := fmt.Sprintf("%s.cost.points[%d]", at, j)
			known(f+".arm", pt.Arm)
			if !finite(pt.Cost) || !finite(pt.Score) {
				p.bad(f, "cost %v, score %v: both must be numbers", pt.Cost, pt.Score)
			}
		}
	}
}

// checkArmRows checks the job kind's arm rows and returns the arms they
// name, which every other part of the kind may refer to.
func (p *problems) checkArmRows(at string, k Kind) map[string]bool {
	arms := map[string]bool{}
	for j, a := range k.Arms {
		f := fmt.Sprintf("%s.arms[%d]", at, j)
		if a.Arm == "" {
			p.bad(f+".arm", "empty (every row needs the arm's name)")
		}
		if arms[a.Arm] {
			p.bad(f+".arm", "%q appears twice in job kind %q (one row per arm)", a.Arm, k.Name)
		}
		arms[a.Arm] = true
		for _, n := range []named{
			{"score.value", a.Score.Value}, {"score.low", a.Score.Low}, {"score.high", a.Score.High},
			{"pass_rate", a.PassRate}, {"median", a.Median}, {"p10", a.P10}, {"worst", a.Worst}, {"p_best", a.PBest},
		} {
			if !finite(n.v) {
				p.bad(f+"."+n.name, "%v is not a number (mark missing data as a warning instead)", n.v)
			}
		}
	}
	return arms
}

// checkPairs checks the job kind's named pairs: known arms, an outcome
// class and finite numbers.
func (p *problems) checkPairs(at string, k Kind, known func(field, arm string)) {
	for j, pr := range k.Pairs {
		f := fmt.Sprintf("%s.pairs[%d]", at, j)
		known(f+".challenger", pr.Challenger)
		known(f+".baseline", pr.Baseline)
		if !slices.Contains(outcomes, pr.Outcome) {
			p.bad(f+".outcome", "%q is not an outcome class (use one of %v)", pr.Outcome, outcomes)
		}
		for _, n := range []named{{"delta.value", pr.Delta.Value}, {"delta.low", pr.Delta.Low}, {"delta.high", pr.Delta.High}, {"p_raw", pr.PRaw}, {"p_holm", pr.PHolm}} {
			if !finite(n.v) {
				p.bad(f+"."+n.name, "%v is not a number", n.v)
			}
		}
	}
}

// checkScores checks the job kind's per-task score table and the rows that
// read their values from it.
func (p *problems) checkScores(at string, k Kind, known func(field, arm string)) {
	if sc := k.Scores; sc != nil {
		if len(sc.Values) != len(sc.Arms) {
			p.bad(at+".scores.values", "%d arms of values for %d arms (one list per arm)", len(sc.Values), len(sc.Arms))
		}
		if !slices.IsSorted(sc.Tasks) || len(slices.Compact(slices.Clone(sc.Tasks))) != len(sc.Tasks) {
			p.bad(at+".scores.tasks", "not sorted and unique (the analysis lists each task once, in order)")
		}
		for j, arm := range sc.Arms {
			known(fmt.Sprintf("%s.scores.arms[%d]", at, j), arm)
			if j >= len(sc.Values) {
				continue
			}
			if len(sc.Values[j]) != len(sc.Tasks) {
				p.bad(fmt.Sprintf("%s.scores.values[%d]", at, j), "%d values for %d tasks (one per task, null when missing)", len(sc.Values[j]), len(sc.Tasks))
			}
			for t, v := range sc.Values[j] {
				if v != nil && !finite(*v) {
					p.bad(fmt.Sprintf("%s.scores.values[%d][%d]", at, j, t), "%v is not a number (leave a missing value null)", *v)
				}
			}
		}
	}
	if len(k.Rows) > 0 && k.Scores == nil {
		p.bad(at+".rows", "%d rows but no scores (the rows read their values from scores)", len(k.Rows))
	}
	for j, r := range k.Rows {
		if r.Pair < 0 || r.Pair >= len(k.Pairs) {
			p.bad(fmt.Sprintf("%s.rows[%d].pair", at, j), "%d is not a pair of job kind %q (it has %d)", r.Pair, k.Name, len(k.Pairs))
		}
	}
}

// checkFidelity checks a job kind's fidelity section: a reference, one
// row per arm, pairs naming its arms (a baseline may be the reference,
// which has no row) and finite numbers.
func (p *problems) checkFidelity(at string, f Fidelity) {
	if f.Reference == "" {
		p.bad(at+".reference", "empty (name the arm the others are held to)")
	}
	arms := map[string]bool{}
	for j, a := range f.Arms {
		fa := fmt.Sprintf("%s.arms[%d]", at, j)
		if a.Arm == "" || arms[a.Arm] {
			p.bad(fa+".arm", "%q: every row needs an arm's name, once", a.Arm)
		}
		arms[a.Arm] = true
		p.checkFinite(fa, []named{{"mean_kl.value", a.MeanKL.Value}, {"mean_kl.low", a.MeanKL.Low}, {"mean_kl.high", a.MeanKL.High},
			{"p99_kl.value", a.P99KL.Value}, {"p99_kl.low", a.P99KL.Low}, {"p99_kl.high", a.P99KL.High},
			{"top_agreement.value", a.TopAgreement.Value}, {"top_agreement.low", a.TopAgreement.Low}, {"top_agreement.high", a.TopAgreement.High},
			{"ref_token_prob", a.RefTokenProb}})
	}
	for j, pr := range f.Pairs {
		fp := fmt.Sprintf("%s.pairs[%d]", at, j)
		if !arms[pr.Challenger] && pr.Challenger != f.Reference {
			p.bad(fp+".challenger", "%q has no fidelity row and is not the reference %q (arms are %v)", pr.Challenger, f.Reference, slices.Sorted(maps.Keys(arms)))
		}
		if !arms[pr.Baseline] && pr.Baseline != f.Reference {
			p.bad(fp+".baseline", "%q has no fidelity row and is not the reference %q", pr.Baseline, f.Reference)
		}
		p.checkFinite(fp, []named{{"mean_kl.value", pr.MeanKL.Value}, {"mean_kl.low", pr.MeanKL.Low}, {"mean_kl.high", pr.MeanKL.High},
			{"p99_kl.value", pr.P99KL.Value}, {"p99_kl.low", pr.P99KL.Low}, {"p99_kl.high", pr.P99KL.High},
			{"top_agreement.value", pr.TopAgreement.Value}, {"top_agreement.low", pr.TopAgreement.Low}, {"top_agreement.high", pr.TopAgreement.High}})
	}
}

func (p *problems) checkFinite(at string, ns []named) {
	for _, n := range ns {
		if !finite(n.v) {
			p.bad(at+"."+n.name, "%v is not a number", n.v)
		}
	}
}

// named is a field name and its value, in the order errors are reported.
type named struct {
	name string
	v    float64
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func armNames(k Kind) []string {
	names := make([]string, len(k.Arms))
	for i, a := range k.Arms {
		names[i] = a.Arm
	}
	return names
}

package findings

import (
	"fmt"
	"gonum.org/v1/gonum/stat"
	"math"
	"sort"
	"strings"

	"rig/analysis"
	"rig/preflight"
	"rig/receipts"
	"rig/report"
	"rig/studies"
)

// doesntFit returns, in a card sub-study, the cells whose stored preflight
// verdict (verdicts, as run.ReadCardVerdicts read them) says they do not fit
// their card. They are not ranked: "doesn't fit at this card" is their
// result, shown in the card table, never a score.
func doesntFit(d *studies.Design, verdicts map[string]preflight.Verdict) map[string]preflight.Verdict {
	if !d.IsCardStudy() {
		return nil
	}
	out := map[string]preflight.Verdict{}
	for arm, v := range verdicts {
		if !v.Fits {
			out[arm] = v
		}
	}
	return out
}

// withoutCells drops cells from the analysis: their arms, the pairs that
// name them and their trials (a confirmation run's receipt is evidence for
// the card table, not a score).
func withoutCells(in analysis.Input, drop map[string]preflight.Verdict) analysis.Input {
	if len(drop) == 0 {
		return in
	}
	var arms []analysis.Arm
	for _, a := range in.Design.Arms {
		if _, ok := drop[a.Name]; !ok {
			arms = append(arms, a)
		}
	}
	in.Design.Arms = arms
	var pairs []analysis.Pair
	for _, p := range in.Design.Pairs {
		_, c := drop[p.Candidate]
		_, b := drop[p.Baseline]
		if !c && !b {
			pairs = append(pairs, p)
		}
	}
	in.Design.Pairs = pairs
	var clauses []analysis.Clause
	for _, c := range in.Design.Rule.Clauses {
		keep := true
		for _, cond := range c.If {
			_, x := drop[cond.Candidate]
			_, y := drop[cond.Baseline]
			keep = keep && !x && !y
		}
		if keep {
			clauses = append(clauses, c)
		}
	}
	in.Design.Rule.Clauses = clauses
	var trials []analysis.Trial
	for _, t := range in.Trials {
		if _, ok := drop[t.Arm]; !ok {
			trials = append(trials, t)
		}
	}
	in.Trials = trials
	return in
}

// cell is one arm at one job kind: a row of the card table.
type cell struct{ arm, jobKind string }

// cardTable is the card sub-study's table: one row per arm × profile × job
// kind, with the preflight's verdict, the runtime's token rates, the score
// with its interval, the peak memory, wall time and energy per trial.
func cardTable(ev *Evidence, rep *analysis.Report) *report.Cards {
	d, verdicts := ev.Design, ev.Verdicts
	if !d.IsCardStudy() {
		return nil
	}
	byCell := map[cell][]receipts.Receipt{}
	for _, r := range ev.Receipts {
		c := cell{r.Arm, r.JobKind}
		byCell[c] = append(byCell[c], r)
	}
	scores := map[cell]analysis.ArmResult{}
	for _, k := range rep.Kinds {
		for _, ar := range k.Arms {
			scores[cell{ar.Arm, k.JobKind}] = ar
		}
	}
	out := &report.Cards{}
	for _, arm := range d.Arms {
		if arm.Card == nil {
			continue
		}
		for _, jk := range d.JobKinds {
			if !arm.RunsJobKind(jk.Name) {
				continue
			}
			row := report.CardRow{Model: arm.BaseArm, Profile: arm.Card.Name, JobKind: jk.Name, Simulated: arm.Card.Simulated}
			v, decided := verdicts[arm.Name]
			row.Fits = decided && v.Fits
			row.Verdict = cardVerdictText(v, decided)
			rs := byCell[cell{arm.Name, jk.Name}]
			if !row.Fits {
				row.Verdict += confirmationText(rs)
			} else {
				fillCardCosts(&row, rs)
				if ar, ok := scores[cell{arm.Name, jk.Name}]; ok && ar.Mean.Valid() {
					row.Score, row.ScoreLow, row.ScoreHigh = numPtr(ar.Mean), numPtr(ar.Interval.Lo), numPtr(ar.Interval.Hi)
				}
				row.Fidelity, row.FidelityReference = ev.Fidelity.cardFidelity(jk.Name, arm)
				if blown := countOutcome(rs, receipts.FailedAtCard); blown > 0 {
					row.Verdict += fmt.Sprintf("; %d trial(s) blew the card's memory and are scored as failures", blown)
				}
			}
			out.Rows = append(out.Rows, row)
		}
	}
	sort.SliceStable(out.Rows, func(i, j int) bool {
		if out.Rows[i].Model != out.Rows[j].Model {
			return out.Rows[i].Model < out.Rows[j].Model
		}
		return out.Rows[i].JobKind < out.Rows[j].JobKind
	})
	return out
}

func cardVerdictText(v preflight.Verdict, decided bool) string {
	switch {
	case !decided:
		return "no preflight verdict stored"
	case v.Fits:
		return fmt.Sprintf("predicted %s of %s, margin %s", v.Predicted, v.Budget, preflight.Size(v.Margin))
	default:
		return v.Reason
	}
}

// confirmationText describes a doesn't-fit cell's confirmation run, if any.
func confirmationText(rs []receipts.Receipt) string {
	for _, r := range rs {
		switch r.Outcome {
		case receipts.FailedAtCard:
			if strings.HasPrefix(r.Detail, "doesn't fit at this card") {
				return "; confirmed: " + r.Detail
			}
			return fmt.Sprintf("; confirmed: the run in the %s MiB reservation was killed by the kernel for memory (peak %s), not retried smaller", r.Pins["card_memory_mib"], preflight.Size(r.PeakMemoryBytes))
		case receipts.Scored, receipts.Capped:
			return fmt.Sprintf("; the confirmation run completed inside the reservation (peak %s): the preflight was conservative here, and the verdict stands by rule", preflight.Size(r.PeakMemoryBytes))
		}
	}
	return ""
}

func countOutcome(rs []receipts.Receipt, o receipts.Outcome) int {
	n := 0
	for _, r := range rs {
		if r.Outcome == o {
			n++
		}
	}
	return n
}

// fillCardCosts averages the counted trials' token rates, wall time and
// energy, and takes their highest peak memory.
func fillCardCosts(row *report.CardRow, rs []receipts.Receipt) {
	var prompt, gen, wall []float64
	var peak int64
	for _, r := range rs {
		if !r.Outcome.Counted() {
			continue
		}
		if r.PromptPerSecond > 0 {
			prompt = append(prompt, r.PromptPerSecond)
		}
		if r.OutputPerSecond > 0 {
			gen = append(gen, r.OutputPerSecond)
		}
		wall = append(wall, float64(r.WallMS)/1000)
		peak = max(peak, r.PeakMemoryBytes)
	}
	row.PromptTokS, row.GenTokS, row.WallSeconds = meanPtr(prompt), meanPtr(gen), meanPtr(wall)
	if peak > 0 {
		row.PeakMemBytes = &peak
	}
	if row.WallSeconds != nil {
		e := *row.WallSeconds * studies.EstimatedWatts
		row.EnergyJoules, row.EnergySource = &e, string(analysis.EnergyEstimate)
	}
}

func meanPtr(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	m := stat.Mean(xs, nil)
	if math.IsNaN(m) {
		return nil
	}
	return &m
}

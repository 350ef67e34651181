package findings

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"rig/analysis"
	"rig/fidelity"
	"rig/report"
	"rig/studies"
)

// Fidelity is what a study's fidelity records (fidelity.jsonl) give its
// report and its decision rule, computed once: per job kind the report's
// section, per card cell its mean KL, and per named pair the paired
// difference in mean KL a fidelity_kl guardrail reads.
type Fidelity struct {
	Kinds map[string]*report.Fidelity
	Cells map[fidelityCell]report.Interval
	// References are the cells the others are held to; the card table
	// says so rather than print the zero they score against themselves.
	References map[fidelityCell]bool
	Deltas     []analysis.FidelityKL
}

// fidelityCell is one arm at one profile in one job kind.
type fidelityCell struct{ jobKind, arm, profile string }

// FidelityOptions are the bootstrap's settings for a design: the analysis
// seed drawn from its hash (analysis.SeedForDesign), the analysis's
// resamples and a 95% level, so the same records always give the same
// intervals and the same report.
func FidelityOptions(designHash string) fidelity.Options {
	return fidelity.Options{Resamples: analysis.MinResamples, Level: 0.95, Seed: analysis.SeedForDesign(designHash)}
}

// ComputeFidelity computes every job kind's fidelity figures from a study's
// records. In a job kind, each profile's records name one reference (in a
// card sub-study, the reference's cell at that profile) and each arm is
// scored one way. A named pair is paired task by task only when both arms
// were scored on the same reference text (the same profile, tasks and
// tokens); a pair of two scored arms that were not is left out with a note
// saying why, never paired on other tokens. A pair against the reference
// stands on the challenger's own tasks, since the reference's KL from
// itself is 0 on every one.
func ComputeFidelity(ctx context.Context, recs []fidelity.StudyRecord, d *studies.Design, o fidelity.Options) (*Fidelity, error) {
	out := &Fidelity{Kinds: map[string]*report.Fidelity{}, Cells: map[fidelityCell]report.Interval{}, References: map[fidelityCell]bool{}}
	for _, jk := range d.JobKinds {
		mine := slices.DeleteFunc(slices.Clone(recs), func(r fidelity.StudyRecord) bool { return r.JobKind != jk.Name })
		if len(mine) == 0 {
			continue
		}
		refOf := map[string]string{} // profile → its records' reference
		scoredBy := map[fidelityCell]string{}
		for _, r := range mine {
			if ref, seen := refOf[r.Profile]; seen && ref != r.Reference {
				return nil, fmt.Errorf("%s: job kind %q has records at profile %q against references %q and %q; a job kind has one reference arm", fidelity.StudyFile, jk.Name, r.Profile, ref, r.Reference)
			}
			refOf[r.Profile] = r.Reference
			c := fidelityCell{jk.Name, r.Arm, r.Profile}
			if prev, seen := scoredBy[c]; seen && prev != r.ScoredBy {
				return nil, fmt.Errorf("%s: arm %q in job kind %q is scored by both %q and %q; an arm is scored one way", fidelity.StudyFile, r.Arm, jk.Name, prev, r.ScoredBy)
			}
			scoredBy[c] = r.ScoredBy
		}
		sec := &report.Fidelity{Reference: cmp.Or(jk.Reference, mine[0].Reference), Level: o.Level, Seed: o.Seed}
		units := map[string]fidelity.Units{}
		profileOf := map[string]string{}
		for _, a := range d.Arms {
			c, ok := recordCell(scoredBy, jk.Name, a)
			if !ok {
				continue
			}
			u := fidelity.StudyUnits(mine, jk.Name, c.profile, c.arm)
			u.Arm = a.Name
			units[a.Name], profileOf[a.Name] = u, c.profile
			if isReference(d, jk, a.Name, refOf[c.profile], c.profile) {
				// The runner keeps the reference's own records (KL 0 by
				// definition); it is what the others are held to, not a
				// row of its own.
				out.References[fidelityCell{jk.Name, a.Name, c.profile}] = true
				continue
			}
			fig, err := fidelity.Summarize(ctx, u, o)
			if err != nil {
				return nil, fmt.Errorf("%s: job kind %q: %w", fidelity.StudyFile, jk.Name, err)
			}
			fa := report.FidelityArm{Arm: a.Name, Profile: c.profile, ScoredBy: scoredBy[c], Tasks: fig.Units, Tokens: fig.Tokens,
				MeanKL: estimate(fig.MeanKL), P99KL: estimate(fig.P99KL), TopAgreement: estimate(fig.TopAgreement), RefTokenProb: fig.ArmProb}
			sec.Arms = append(sec.Arms, fa)
			out.Cells[fidelityCell{jk.Name, a.Name, c.profile}] = fa.MeanKL
		}
		for _, p := range d.ResolvedPairs() {
			if p.JobKind != jk.Name {
				continue
			}
			c, okC := units[p.Challenger]
			b, okB := units[p.Incumbent]
			switch {
			case !okC:
				continue
			case isReference(d, jk, p.Incumbent, refOf[profileOf[p.Challenger]], profileOf[p.Challenger]):
				// Held to itself on the challenger's own tasks and tokens
				// (its records, where kept, say the same: KL 0), so the pair
				// stands on every task the challenger was scored on.
				b = referenceUnits(c, p.Incumbent)
			case !okB:
				continue
			case profileOf[p.Challenger] != profileOf[p.Incumbent]:
				sec.Notes = append(sec.Notes, fmt.Sprintf("%s vs %s is not paired: they were scored on the reference's outputs at different profiles (%s and %s), so their tokens are not the same text.",
					p.Challenger, p.Incumbent, profileOf[p.Challenger], profileOf[p.Incumbent]))
				continue
			}
			diff, err := fidelity.Compare(ctx, b, c, o)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				sec.Notes = append(sec.Notes, fmt.Sprintf("%s vs %s is not paired: %v.", p.Challenger, p.Incumbent, err))
				continue
			}
			sec.Pairs = append(sec.Pairs, report.FidelityPair{Challenger: p.Challenger, Baseline: p.Incumbent,
				MeanKL: estimate(diff.MeanKL), P99KL: estimate(diff.P99KL), TopAgreement: estimate(diff.TopAgreement)})
			out.Deltas = append(out.Deltas, analysis.FidelityKL{JobKind: jk.Name, Candidate: p.Challenger, Baseline: p.Incumbent,
				CandidateValue: analysis.Num(meanKL(c)), BaselineValue: analysis.Num(meanKL(b)),
				Delta: analysis.Num(diff.MeanKL.Value), Interval: diff.MeanKL.Interval})
		}
		out.Kinds[jk.Name] = sec
	}
	return out, nil
}

// isReference says whether arm is the reference the challenger was scored
// against: the name its records give, or the design's reference itself (its
// cell at the challenger's profile, in a card sub-study).
func isReference(d *studies.Design, jk studies.JobKind, arm, recordRef, profile string) bool {
	if arm == recordRef {
		return true
	}
	a := d.Arm(arm)
	if a == nil || jk.Reference == "" {
		return false
	}
	if a.Card == nil {
		return a.Name == jk.Reference
	}
	return a.BaseArm == jk.Reference && a.Card.Name == profile
}

// recordCell is where a design arm's records are: under its own name (at
// whatever profile they name, "" outside a card sub-study), or, for a card
// cell, under its base arm at the cell's profile. An arm the records do not
// name has none; a record naming no arm of the design is not read.
func recordCell(has map[fidelityCell]string, jobKind string, a studies.Arm) (fidelityCell, bool) {
	// In key order, so that records naming one arm at several profiles are
	// read the same way every time.
	cells := slices.SortedFunc(maps.Keys(has), func(x, y fidelityCell) int {
		return cmp.Or(cmp.Compare(x.arm, y.arm), cmp.Compare(x.profile, y.profile))
	})
	for _, c := range cells {
		if c.arm == a.Name && (a.Card == nil || c.profile == a.Card.Name || c.profile == "") {
			return c, true
		}
	}
	if a.Card != nil {
		c := fidelityCell{jobKind, a.BaseArm, a.Card.Name}
		if _, ok := has[c]; ok {
			return c, true
		}
	}
	return fidelityCell{}, false
}

// referenceUnits is the reference scored against itself on the same tasks
// and tokens as u: KL 0 and the top token always its own. The study keeps
// no records of it, since they hold nothing to measure; a pair whose
// baseline is the reference pairs against these.
func referenceUnits(u fidelity.Units, ref string) fidelity.Units {
	out := fidelity.Units{Arm: ref, Names: u.Names}
	for _, toks := range u.Tokens {
		same := make([]fidelity.Token, len(toks))
		for i, t := range toks {
			same[i] = fidelity.Token{RefTop: t.RefTop, ArmTop: t.RefTop, RefLogprob: t.RefLogprob, ArmLogprob: t.RefLogprob}
		}
		out.Tokens = append(out.Tokens, same)
	}
	return out
}

// meanKL is the mean over units of each unit's mean KL per token, as
// fidelity.Figures.MeanKL is.
func meanKL(u fidelity.Units) float64 {
	var s float64
	for _, toks := range u.Tokens {
		var k float64
		for _, t := range toks {
			k += t.KL
		}
		s += k / float64(len(toks))
	}
	return s / float64(len(u.Tokens))
}

// estimate is a fidelity estimate as the report carries it. A bound the
// bootstrap could not give (NaN) is the value itself, so the report's
// numbers stay finite and the method's note says why.
func estimate(e fidelity.Estimate) report.Interval {
	lo, hi := float64(e.Interval.Lo), float64(e.Interval.Hi)
	if math.IsNaN(lo) || math.IsNaN(hi) {
		lo, hi = e.Value, e.Value
	}
	return report.Interval{Value: e.Value, Low: lo, High: hi, Method: string(e.Interval.Method), Note: e.Interval.Note}
}

// fidelityData fills the report's fidelity: each job kind's section, with
// the arms' pass rates beside, and the card table's fidelity column.
func fidelityData(f *Fidelity, data *report.Data) {
	if f == nil {
		return
	}
	for i := range data.Kinds {
		k := &data.Kinds[i]
		sec, ok := f.Kinds[k.Name]
		if !ok {
			continue
		}
		s := *sec
		s.Arms = slices.Clone(sec.Arms)
		for j := range s.Arms {
			for _, a := range k.Arms {
				if a.Arm == s.Arms[j].Arm {
					pr := a.PassRate
					s.Arms[j].PassRate = &pr
				}
			}
		}
		k.Fidelity = &s
	}
}

// cardFidelity is a card cell's mean KL, nil where no record scored it,
// and whether the cell is the reference the others at its profile are held
// to.
func (f *Fidelity) cardFidelity(jobKind string, arm studies.Arm) (*report.Interval, bool) {
	if f == nil || arm.Card == nil {
		return nil, false
	}
	for c := range f.References {
		if c.jobKind == jobKind && c.arm == arm.Name {
			return nil, true
		}
	}
	for c, iv := range f.Cells {
		if c.jobKind == jobKind && c.arm == arm.Name {
			return &iv, false
		}
	}
	return nil, false
}

// FidelityRankingWords is a job kind's ranking measure when it ranks by
// fidelity: what it measures, said plainly, since a reader would otherwise
// take the lower KL for the better answers.
func FidelityRankingWords(reference string) string {
	return fmt.Sprintf("mean KL per token to %s, nats (closeness to the reference model, not correctness)", reference)
}

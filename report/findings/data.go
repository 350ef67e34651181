package findings

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"rig/analysis"
	"rig/genrecord"
	"rig/licences"
	"rig/receipts"
	"rig/report"
	"rig/studies"
	"rig/tasks"
)

// Extras is what the report shows beyond the evidence and the analysis,
// read by the caller from the study's own files and store.
type Extras struct {
	// GeneratedAt is when the report is made.
	GeneratedAt time.Time
	// Licences are the design's items as the study's own recorded registry
	// rules on them (studies.LicenceResultFor), not the bundled one; nil
	// when the registry could not be read (then only the items are shown).
	Licences []licences.Line
	// Replay is the execution's kept replay; nil when it was never replayed.
	Replay []genrecord.Summary
	// Events are the store's governor events; those of other executions
	// are left out here.
	Events []receipts.GovernorEvent
	// Banks are the frozen banks by job kind that still read at the hash
	// the snapshot froze: the rows' category (the task's template) and tags
	// come from them, and a bank left out only leaves those empty.
	Banks map[string]*tasks.Bank
	// Decision is the recorded decision, nil when none is recorded.
	Decision *Decided
}

// Decided is who recorded the study's decision, when and why.
type Decided struct {
	Actor     string
	At        time.Time
	Rationale string
}

// ReportData maps the evidence, the analysis input it gave (Input) and the
// analysis's report onto the report's data.
func ReportData(ev *Evidence, ai analysis.Input, rep *analysis.Report, x Extras) report.Data {
	d, snap := ev.Design, ev.Snapshot
	data := report.Data{Study: ev.Study, DesignHash: snap.DesignHash, ComparisonHash: rep.ComparisonHash, GeneratedAt: x.GeneratedAt,
		AnalysisSeed: ai.Design.Seed, AnalysisSeedFrom: analysis.SeedFrom,
		Sentences: report.Sentences{JobKinds: d.Sentences.JobKindsAndDecisions, Candidates: d.Sentences.CandidatesAndHowRun, Measure: d.Sentences.WhyTheMeasure}}
	data.Stop = stopData(rep.Sequential)
	data.Licences = licenceRows(d.Items, x.Licences)
	runtimeOf := map[string]string{}
	digest := map[string]string{}
	baseline := map[string]bool{}
	for _, arm := range d.Arms {
		runtimeOf[arm.Name] = arm.Runtime
		baseline[arm.Name] = arm.Role == studies.RoleIncumbent
	}
	for _, fa := range snap.Arms {
		digest[fa.Name] = fa.ModelSHA256
	}
	if len(ev.Receipts) > 0 {
		data.Machine = ev.Receipts[0].Machine
	}
	outputs := ev.Kept.Outputs
	output := func(arm, kind, task string) string {
		return outputs[studies.TrialKey{Arm: arm, JobKind: kind, Task: task}]
	}
	data.Replay = Replay(x.Replay)
	src := newRowSources(ev, x)
	perTask := analysis.PerTask(ai)
	for ki, k := range rep.Kinds {
		jk := report.Kind{Name: k.JobKind, Measure: string(k.Measure), Direction: "higher", Gate: k.Gate, BestBar: d.PBestBar, Alpha: rep.Alpha,
			Interval: rep.IntervalText(k), Verdict: k.Verdict, Leader: k.Leader}
		for _, x := range snap.Excluded() {
			if x.JobKind == k.JobKind {
				jk.Excluded = append(jk.Excluded, report.Excluded{Task: x.Task, Why: x.Why})
			}
		}
		for _, b := range snap.Banks {
			if b.JobKind != k.JobKind {
				continue
			}
			for _, p := range b.NearDuplicates {
				jk.NearDuplicates = append(jk.NearDuplicates, report.NearDuplicate{A: p.A, B: p.B, Similarity: p.Similarity})
			}
			if len(b.NearDuplicates) > 0 {
				jk.NearMethod = tasks.NearMethod()
			}
		}
		if d.Power.SmallestDetectableDifference > 0 {
			v := d.Power.SmallestDetectableDifference
			jk.Detectable = &v
		}
		costOf := map[string]analysis.Cost{}
		for _, c := range k.Costs {
			costOf[c.Arm] = c
		}
		var cost report.CostFigure
		cost.Label = "mean wall time per trial (s)"
		for _, ar := range k.Arms {
			c := costOf[ar.Arm]
			row := report.Arm{Arm: ar.Arm, Runtime: runtimeOf[ar.Arm], Digest: shortHash(digest[ar.Arm]), Baseline: baseline[ar.Arm],
				Score:    report.Interval{Value: num(ar.Mean), Low: num(ar.Interval.Lo), High: num(ar.Interval.Hi), Method: string(ar.Interval.Method), Note: ar.Interval.Note},
				PassRate: num(ar.PassRate), Median: num(ar.Median), P10: num(ar.P10), Worst: num(ar.Worst), PBest: num(ar.PBest),
				Tie:   k.Verdict == "tie" && (ar.Arm == k.Leader || slices.Contains(k.TiedWith, ar.Arm)),
				Tasks: ar.Tasks, Trials: ar.Counts.Trials, Preempted: ar.Counts.Preempted, Capped: ar.Counts.Capped,
				WallSeconds: numPtr(c.MeanWallSeconds), EnergyJoules: numPtr(c.MeanEnergyJoules), EnergySource: string(c.EnergySource)}
			if c.PeakMemoryBytes > 0 {
				p := c.PeakMemoryBytes
				row.PeakMemBytes = &p
			}
			jk.Arms = append(jk.Arms, row)
			if len(ar.NoResult) > 0 {
				jk.NoOutput = append(jk.NoOutput, report.NoOutput{Arm: ar.Arm, Tasks: ar.NoResult})
			}
			if c.MeanWallSeconds.Valid() && ar.Mean.Valid() {
				cost.Points = append(cost.Points, report.CostPoint{Arm: ar.Arm, Cost: num(c.MeanWallSeconds), Score: num(ar.Mean)})
			}
		}
		if len(cost.Points) > 0 {
			jk.Cost = &cost
		}
		if len(k.Sweep) > 0 {
			sw := &report.Sweep{}
			for _, ar := range k.Arms {
				sw.Lines = append(sw.Lines, report.SweepLine{Arm: ar.Arm})
			}
			for _, p := range k.Sweep {
				sw.Gates = append(sw.Gates, p.Gate)
				for i := range sw.Lines {
					v := math.NaN()
					if i < len(p.PassRate) {
						v = num(p.PassRate[i])
					}
					sw.Lines[i].PassRate = append(sw.Lines[i].PassRate, v)
				}
			}
			jk.Sweep = sw
		}
		for _, p := range rep.Pairs {
			if p.JobKind != k.JobKind {
				continue
			}
			pr := report.Pair{Challenger: p.Candidate, Baseline: p.Baseline,
				Delta: report.Interval{Value: num(p.Delta), Low: num(p.Interval.Lo), High: num(p.Interval.Hi), Method: string(p.Interval.Method), Note: p.Interval.Note},
				PRaw:  num(p.P), PHolm: num(p.PHolm), Test: p.Test, Outcome: string(p.Outcome), Missing: p.MissingTasks}
			for _, m := range p.Missing {
				pr.MissingTasks = append(pr.MissingTasks, m.Task+" (lacks "+m.Lacks+")")
			}
			if p.Shown != "shown" && jk.Detectable != nil {
				pr.NotShown = report.NotShownText(num(p.Delta), *jk.Detectable)
			}
			jk.Pairs = append(jk.Pairs, pr)
			for _, t := range p.NewlyFixed {
				jk.Paired = append(jk.Paired, report.PairedRow{Task: t, Challenger: p.Candidate, Baseline: p.Baseline, Change: report.NewlyFixed,
					ChallengerScore: 1, BaselineScore: 0, ChallengerOutput: output(p.Candidate, k.JobKind, t), BaselineOutput: output(p.Baseline, k.JobKind, t)})
			}
			for _, t := range p.NewlyFailing {
				jk.Paired = append(jk.Paired, report.PairedRow{Task: t, Challenger: p.Candidate, Baseline: p.Baseline, Change: report.NewlyFailing,
					ChallengerScore: 0, BaselineScore: 1, ChallengerOutput: output(p.Candidate, k.JobKind, t), BaselineOutput: output(p.Baseline, k.JobKind, t)})
			}
		}
		for _, f := range failureCounts(ev.Receipts, k.JobKind, judgedPass(d, k.JobKind, ai.Trials)) {
			// A card sub-study's doesn't-fit cells are not ranked; their
			// confirmation runs are in the card table instead.
			if slices.ContainsFunc(k.Arms, func(ar analysis.ArmResult) bool { return ar.Arm == f.Arm }) {
				jk.Failures = append(jk.Failures, f)
			}
		}
		for _, l := range rep.Latency {
			if l.JobKind == k.JobKind {
				jk.Latency = append(jk.Latency, report.Latency{Arm: l.Arm, Trials: l.Trials, P50MS: numPtr(l.P50MS), P95MS: numPtr(l.P95MS),
					DeltaP50MS: numPtr(l.DeltaP50MS), DeltaP95MS: numPtr(l.DeltaP95MS)})
			}
		}
		for _, sp := range rep.Speed {
			if sp.JobKind == k.JobKind {
				card := speedCard(sp)
				card.Runtime, card.Baseline = runtimeOf[sp.Arm], baseline[sp.Arm]
				jk.Speed = append(jk.Speed, card)
			}
		}
		for _, sr := range rep.SRM {
			if sr.JobKind == k.JobKind {
				jk.SRM = &report.SRM{Arms: sr.Arms, Planned: sr.Planned, Scored: sr.Scored, ChiSq: numPtr(sr.ChiSq), DF: sr.DF, P: numPtr(sr.P), Alpha: sr.Alpha, Mismatch: sr.Mismatch}
			}
		}
		if ki < len(perTask) && perTask[ki].JobKind == k.JobKind {
			kindRows(&jk, perTask[ki], ai.Design, src)
		}
		data.Kinds = append(data.Kinds, jk)
	}
	data.Cards = cardTable(ev, rep)
	var unfit []string
	for arm, v := range doesntFit(d, ev.Verdicts) {
		unfit = append(unfit, fmt.Sprintf("%s doesn't fit at card %s (%s): not ranked.", arm, v.Profile.Name, v.Reason))
	}
	sort.Strings(unfit)
	data.Warnings = append(data.Warnings, unfit...)
	for _, w := range rep.Warnings {
		data.Warnings = append(data.Warnings, w.String())
	}
	measured := 0
	for _, r := range ev.Receipts {
		if r.EnergySource == receipts.EnergyMeasuredNVML {
			measured++
		}
	}
	switch {
	case measured == 0:
		data.Warnings = append(data.Warnings, "Energy is estimated from wall time at a nominal package draw: this machine exposes no power counter (no NVML, no readable RAPL).")
	case measured < len(ev.Receipts):
		data.Warnings = append(data.Warnings, fmt.Sprintf("Energy is measured by the card's NVML counter on %d of %d receipts; the rest are estimated from wall time, and each arm's figure is labelled by its weakest source.", measured, len(ev.Receipts)))
	}
	dec := rep.Decision
	data.Decision = &report.Decision{Rule: d.DecisionRule.Text, Trace: dec.Trace, Outcome: dec.Action, NextBaseline: dec.NextBaseline,
		Rationale: "evaluated by rig from the pre-registered rule; not yet recorded with rig study decide"}
	for _, c := range rep.Constraints {
		data.Decision.Constraints = append(data.Decision.Constraints, report.Constraint{Clause: c.Clause, Metric: c.Metric, JobKind: c.JobKind,
			Challenger: c.Candidate, Baseline: c.Baseline, Limit: c.Limit, Reading: c.Reading, Blocks: c.Blocks})
	}
	if rec := x.Decision; rec != nil {
		data.Decision.Actor, data.Decision.At, data.Decision.Rationale = rec.Actor, rec.At, rec.Rationale
	}
	return data
}

// licenceRows are the design's items with the use and verdict the
// registry's line for each gives; an item with no line (the registry could
// not be read, or it blocks the item) keeps its design use and no verdict.
func licenceRows(items []studies.Item, lines []licences.Line) []report.Licence {
	var out []report.Licence
	for _, it := range items {
		row := report.Licence{Item: it.Name, Entry: it.RegistryID, Use: it.Use}
		for _, l := range lines {
			if string(l.Item.Role) == it.Role && l.Item.Name == it.Name && l.Item.RegistryID == it.RegistryID && string(l.Item.Use) == it.Use {
				row.Use, row.Verdict = cmp.Or(string(l.Item.Use), it.Use), string(l.Verdict)
				break
			}
		}
		out = append(out, row)
	}
	return out
}

func num(n analysis.Num) float64 { return float64(n) }

func numPtr(n analysis.Num) *float64 {
	if !n.Valid() {
		return nil
	}
	v := float64(n)
	return &v
}

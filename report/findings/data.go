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

// Decided is who recorded the study's decision, when and why, and the
// corrections appended to it since, oldest first.
type Decided struct {
	Actor      string
	At         time.Time
	Rationale  string
	Amendments []studies.Amendment
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
	if len(ev.Receipts) > 0 {
		data.Machine = ev.Receipts[0].Machine
	}
	data.Replay = Replay(x.Replay)
	kb := kindBuilder{ev: ev, ai: ai, rep: rep, arms: armFactsOf(ev), src: newRowSources(ev, x)}
	perTask := analysis.PerTask(ai)
	for ki, k := range rep.Kinds {
		jk := kb.kind(k)
		if ki < len(perTask) && perTask[ki].JobKind == k.JobKind {
			kindRows(&jk, perTask[ki], ai.Design, kb.src)
		}
		data.Kinds = append(data.Kinds, jk)
	}
	fidelityData(ev.Fidelity, &data)
	data.Cards = cardTable(ev, rep)
	data.Warnings = reportWarnings(ev, rep)
	data.Decision = decisionData(d, rep, x)
	return data
}

// armFacts are what the design and the snapshot say of each arm: its
// runtime, its model's digest, and whether it is the incumbent.
type armFacts struct {
	runtime, digest map[string]string
	baseline        map[string]bool
}

func armFactsOf(ev *Evidence) armFacts {
	f := armFacts{runtime: map[string]string{}, digest: map[string]string{}, baseline: map[string]bool{}}
	for _, arm := range ev.Design.Arms {
		f.runtime[arm.Name] = string(arm.Runtime)
		f.baseline[arm.Name] = arm.Role == studies.RoleIncumbent
	}
	for _, fa := range ev.Snapshot.Arms {
		f.digest[fa.Name] = fa.ModelSHA256
	}
	return f
}

// kindBuilder turns one job kind's analysis into its report section.
type kindBuilder struct {
	ev   *Evidence
	ai   analysis.Input
	rep  *analysis.Report
	arms armFacts
	src  rowSources
}

// kind is the job kind's section but for its per-task rows (kindRows).
func (b kindBuilder) kind(k analysis.KindResult) report.Kind {
	d, rep := b.ev.Design, b.rep
	jk := report.Kind{Name: k.JobKind, Measure: string(k.Measure), Direction: "higher", Gate: k.Gate, BestBar: d.PBestBar, Alpha: rep.Alpha,
		Interval: rep.IntervalText(k), Verdict: k.Verdict, Leader: k.Leader}
	if k.RankBy == analysis.MetricFidelityKL {
		ref := ""
		for _, dk := range d.JobKinds {
			if dk.Name == k.JobKind {
				ref = dk.Reference
			}
		}
		jk.RankedBy = FidelityRankingWords(ref)
	}
	b.taskLists(&jk, k.JobKind)
	if d.Power.SmallestDetectableDifference > 0 {
		v := d.Power.SmallestDetectableDifference
		jk.Detectable = &v
	}
	if pw := rep.Power; pw != nil && pw.PilotDiscordance > 0 {
		jk.DetectableTasks, jk.DetectablePower, jk.DetectablePilot = pw.Tasks, pw.Power, pw.PilotDiscordance
		if pw.MinDetectable.Valid() {
			v := float64(pw.MinDetectable)
			jk.DetectableComputed = &v
		}
	}
	b.armRows(&jk, k)
	jk.Sweep = sweepOf(k)
	b.pairs(&jk, k.JobKind)
	for _, f := range failureCounts(b.ev.Receipts, k.JobKind, judgedPass(d, k.JobKind, b.ai.Trials)) {
		// A card sub-study's doesn't-fit cells are not ranked; their
		// confirmation runs are in the card table instead.
		if slices.ContainsFunc(k.Arms, func(ar analysis.ArmResult) bool { return ar.Arm == f.Arm }) {
			jk.Failures = append(jk.Failures, f)
		}
	}
	b.timings(&jk, k.JobKind)
	return jk
}

// taskLists are the tasks the design left out and the near duplicates.
func (b kindBuilder) taskLists(jk *report.Kind, jobKind string) {
	for _, x := range b.ev.Snapshot.Excluded() {
		if x.JobKind == jobKind {
			jk.Excluded = append(jk.Excluded, report.Excluded{Task: x.Task, Why: x.Why})
		}
	}
	for _, bank := range b.ev.Snapshot.Banks {
		if bank.JobKind != jobKind {
			continue
		}
		for _, p := range bank.NearDuplicates {
			jk.NearDuplicates = append(jk.NearDuplicates, report.NearDuplicate{A: p.A, B: p.B, Similarity: p.Similarity})
		}
		if len(bank.NearDuplicates) > 0 {
			jk.NearMethod = tasks.NearMethod()
		}
	}
}

// armRows are the arms' table, the tasks each left without an output, and
// the cost-against-score figure.
func (b kindBuilder) armRows(jk *report.Kind, k analysis.KindResult) {
	costOf := map[string]analysis.Cost{}
	for _, c := range k.Costs {
		costOf[c.Arm] = c
	}
	var cost report.CostFigure
	cost.Label = "mean wall time per trial (s)"
	for _, ar := range k.Arms {
		c := costOf[ar.Arm]
		row := report.Arm{Arm: ar.Arm, Runtime: b.arms.runtime[ar.Arm], Digest: shortHash(b.arms.digest[ar.Arm]), Baseline: b.arms.baseline[ar.Arm],
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
}

// sweepOf is the pass rate of each arm at each gate, nil without a sweep.
func sweepOf(k analysis.KindResult) *report.Sweep {
	if len(k.Sweep) == 0 {
		return nil
	}
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
	return sw
}

// pairs are the named pairs' rows and the tasks that flipped between them,
// with both outputs.
func (b kindBuilder) pairs(jk *report.Kind, jobKind string) {
	output := func(arm, task string) string {
		return b.ev.Kept.Outputs[studies.TrialKey{Arm: arm, JobKind: jobKind, Task: task}]
	}
	for _, p := range b.rep.Pairs {
		if p.JobKind != jobKind {
			continue
		}
		pr := report.Pair{Challenger: p.Candidate, Baseline: p.Baseline,
			Delta: report.Interval{Value: num(p.Delta), Low: num(p.Interval.Lo), High: num(p.Interval.Hi), Method: string(p.Interval.Method), Note: p.Interval.Note},
			PRaw:  num(p.P), PHolm: num(p.PHolm), Test: p.Test, Outcome: string(p.Outcome), Missing: p.MissingTasks}
		for _, m := range p.Missing {
			pr.MissingTasks = append(pr.MissingTasks, m.Task+" (lacks "+m.Lacks+")")
		}
		var detectable float64
		if jk.Detectable != nil {
			detectable = *jk.Detectable
		}
		pr.Reading = p.Reading(detectable, jk.Alpha)
		if p.Shown != "shown" && detectable > 0 {
			pr.NotShown = pr.Reading
		}
		jk.Pairs = append(jk.Pairs, pr)
		for _, t := range p.NewlyFixed {
			jk.Paired = append(jk.Paired, report.PairedRow{Task: t, Challenger: p.Candidate, Baseline: p.Baseline, Change: report.NewlyFixed,
				ChallengerScore: 1, BaselineScore: 0, ChallengerOutput: output(p.Candidate, t), BaselineOutput: output(p.Baseline, t)})
		}
		for _, t := range p.NewlyFailing {
			jk.Paired = append(jk.Paired, report.PairedRow{Task: t, Challenger: p.Candidate, Baseline: p.Baseline, Change: report.NewlyFailing,
				ChallengerScore: 0, BaselineScore: 1, ChallengerOutput: output(p.Candidate, t), BaselineOutput: output(p.Baseline, t)})
		}
	}
}

// timings are the latency table, the speed cards and the sample-ratio check.
func (b kindBuilder) timings(jk *report.Kind, jobKind string) {
	for _, l := range b.rep.Latency {
		if l.JobKind == jobKind {
			jk.Latency = append(jk.Latency, report.Latency{Arm: l.Arm, Trials: l.Trials, P50MS: numPtr(l.P50MS), P95MS: numPtr(l.P95MS),
				DeltaP50MS: numPtr(l.DeltaP50MS), DeltaP95MS: numPtr(l.DeltaP95MS)})
		}
	}
	for _, sp := range b.rep.Speed {
		if sp.JobKind == jobKind {
			card := speedCard(sp)
			card.Runtime, card.Baseline = b.arms.runtime[sp.Arm], b.arms.baseline[sp.Arm]
			jk.Speed = append(jk.Speed, card)
		}
	}
	for _, sr := range b.rep.SRM {
		if sr.JobKind == jobKind {
			jk.SRM = &report.SRM{Arms: sr.Arms, Planned: sr.Planned, Scored: sr.Scored, ChiSq: numPtr(sr.ChiSq), DF: sr.DF, P: numPtr(sr.P), Alpha: sr.Alpha, Mismatch: sr.Mismatch}
		}
	}
}

// reportWarnings are the arms that do not fit their card, the analysis's
// warnings, and where the energy figures came from.
func reportWarnings(ev *Evidence, rep *analysis.Report) []string {
	var unfit []string
	for arm, v := range doesntFit(ev.Design, ev.Verdicts) {
		unfit = append(unfit, fmt.Sprintf("%s doesn't fit at card %s (%s): not ranked.", arm, v.Profile.Name, v.Reason))
	}
	sort.Strings(unfit)
	warnings := unfit
	for _, w := range rep.Warnings {
		warnings = append(warnings, w.String())
	}
	warnings = append(warnings, ev.Design.SlotsDiffer()...)
	measured := 0
	for _, r := range ev.Receipts {
		if r.EnergySource == receipts.EnergyMeasuredNVML {
			measured++
		}
	}
	switch {
	case measured == 0:
		warnings = append(warnings, "Energy is estimated from wall time at a nominal package draw: this machine exposes no power counter (no NVML, no readable RAPL).")
	case measured < len(ev.Receipts):
		warnings = append(warnings, fmt.Sprintf("Energy is measured by the card's NVML counter on %d of %d receipts; the rest are estimated from wall time, and each arm's figure is labelled by its weakest source.", measured, len(ev.Receipts)))
	}
	return warnings
}

// decisionData is the rule's outcome as rig evaluated it, its guardrails,
// and who recorded the decision when one was.
func decisionData(d *studies.Design, rep *analysis.Report, x Extras) *report.Decision {
	dec := rep.Decision
	out := &report.Decision{Rule: d.DecisionRule.Text, Trace: dec.Trace, Outcome: dec.Action, NextBaseline: dec.NextBaseline,
		Rationale: "evaluated by rig from the pre-registered rule; not yet recorded with rig study decide"}
	for _, c := range rep.Constraints {
		out.Constraints = append(out.Constraints, report.Constraint{Clause: c.Clause, Metric: c.Metric, JobKind: c.JobKind,
			Challenger: c.Candidate, Baseline: c.Baseline, Limit: c.Limit, Reading: c.Reading, Blocks: c.Blocks})
	}
	if rec := x.Decision; rec != nil {
		out.Actor, out.At, out.Rationale = rec.Actor, rec.At, rec.Rationale
		for _, a := range rec.Amendments {
			out.Amendments = append(out.Amendments, report.Amendment{Seq: a.Seq, Actor: a.Actor, At: a.At, Rationale: a.Rationale})
		}
	}
	return out
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

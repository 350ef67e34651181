package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/preflight"
	"rig/receipts"
	"rig/studies"
	"rig/studies/analysis"
	"rig/studies/report"
	"rig/studies/run"
	"rig/tasks"
)

// analysisDesign maps a frozen design onto what the analysis reads. Its seed
// is drawn from the design's hash (analysis.SeedForDesign), so the same
// design always resamples the same way and two designs never share streams.
// Every
// clause of the design's decision rule becomes analysis clauses carrying its
// number and condition, so the trace shows the rule as written: a condition
// about "the challenger" becomes one clause per named pair, and
// "underpowered" and "p_best_below_bar" become checks the analysis judges on
// its own figures (power, P(best)).
func analysisDesign(d *studies.Design, designHash string) analysis.Design {
	ad := analysis.Design{Hash: designHash, Alpha: d.DecisionRule.Alpha, PBestBar: d.PBestBar, Resamples: analysis.MinResamples,
		PermutationResamples: 20000, Seed: analysis.SeedForDesign(designHash), Interval: analysis.BCa, Level: 0.95, CostMeasure: analysis.CostWall, CostFactor: 2}
	if ad.Alpha == 0 {
		ad.Alpha = 0.05
	}
	if ad.PBestBar == 0 {
		ad.PBestBar = 0.8
	}
	for _, a := range d.Arms {
		ad.Arms = append(ad.Arms, analysis.Arm{Name: a.Name})
		if a.Role == studies.RoleIncumbent && ad.Incumbent == "" {
			ad.Incumbent = a.Name
		}
	}
	for _, jk := range d.JobKinds {
		m := analysis.MeasurePass
		if jk.RankingMeasure.Name != "pass_rate" {
			m = analysis.MeasureScore
		}
		ad.JobKinds = append(ad.JobKinds, analysis.JobKind{Name: jk.Name, Measure: m, Gate: 0.5})
	}
	seen := map[string]bool{}
	for _, p := range d.ResolvedPairs() {
		k := p.Challenger + "|" + p.Incumbent
		if !seen[k] {
			seen[k] = true
			ad.Pairs = append(ad.Pairs, analysis.Pair{Candidate: p.Challenger, Baseline: p.Incumbent})
		}
	}
	if d.Power.PilotDiscordance > 0 {
		ad.Power = &analysis.PowerPlan{PilotDiscordance: d.Power.PilotDiscordance, Tasks: d.Power.TaskCount, Power: d.Power.Power,
			SmallestDifference: d.Power.SmallestDetectableDifference}
	}
	for _, c := range d.DecisionRule.Clauses {
		if c.MaxCostRatio > 0 && c.When == "challenger_costs_more" {
			ad.CostFactor = c.MaxCostRatio
		}
	}
	for i, c := range d.DecisionRule.Clauses {
		var outs []analysis.Outcome
		switch c.When {
		default:
			// Registration refuses other conditions; passing one on makes the
			// analysis refuse it by name rather than drop it from the trace.
			fallthrough
		case studies.WhenUnderpowered, studies.WhenPBestBelowBar:
			ad.Rule.Clauses = append(ad.Rule.Clauses, analysis.Clause{Check: c.When, Then: c.Assign, Number: i + 1, When: c.When})
			continue
		case studies.WhenChallengerBetter:
			outs = []analysis.Outcome{analysis.Improvement}
		case studies.WhenChallengerCostMore:
			outs = []analysis.Outcome{analysis.Tradeoff}
		case studies.WhenChallengerWorse:
			outs = []analysis.Outcome{analysis.Regression}
		case studies.WhenNotShown:
			outs = []analysis.Outcome{analysis.Inconclusive, analysis.Tie}
		}
		for _, p := range ad.Pairs {
			then := c.Assign
			if strings.Contains(then, "challenger") {
				then = "accept " + p.Candidate
			}
			ad.Rule.Clauses = append(ad.Rule.Clauses, analysis.Clause{If: []analysis.Condition{{Outcomes: outs, Candidate: p.Candidate, Baseline: p.Baseline}},
				Then: then, Number: i + 1, When: c.When})
		}
	}
	ad.Rule.Default = d.DecisionRule.Otherwise
	for _, g := range d.Guardrails {
		ad.Guardrails = append(ad.Guardrails, analysis.Guardrail{Metric: g.Metric, HigherIsBetter: g.Direction == "higher",
			MaxRelative: g.MaxRelativeIncrease, MaxAbsolute: g.MaxAbsoluteIncrease})
	}
	if w := d.WinnerPolicy; w != nil {
		ad.Policy = &analysis.WinnerPolicy{MinPassRateDelta: w.MinPassRateDelta, MaxCostIncrease: w.MaxCostIncrease,
			MaxP95LatencyIncrease: w.MaxP95LatencyIncrease, AllowRegressions: w.AllowRegressions, AllowIncomparableJudges: w.AllowIncomparableJudges}
	}
	return ad
}

// receiptMetrics are the receipt fields the design's guardrails name
// ("receipt.FIELD").
func receiptMetrics(d *studies.Design) []string {
	var out []string
	for _, g := range d.Guardrails {
		if f, ok := strings.CutPrefix(g.Metric, studies.ReceiptMetricPrefix); ok {
			out = append(out, f)
		}
	}
	return out
}

// metricsOf reads the named numeric fields of a receipt as it is written
// (its JSON keys); a field the receipt lacks or that is not a number is
// left out, and the guardrail on it reads "not measured".
func metricsOf(r receipts.Receipt, fields []string) map[string]float64 {
	if len(fields) == 0 {
		return nil
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	out := map[string]float64{}
	for _, f := range fields {
		if v, ok := m[f].(float64); ok {
			out[f] = v
		}
	}
	return out
}

// reportInputs is everything one analysis or report request reads: the
// snapshot and its design, parsed once, and the execution's records in the
// store, read once each. The steps after read only this.
type reportInputs struct {
	name   string
	execID string
	snap   *studies.Snapshot
	design *studies.Design
	// plan is the execution's plan, nil when it could not be read (then
	// no trial is reported missing for want of a receipt).
	plan     *studies.Plan
	receipts []receipts.Receipt
	// grades are the execution's stored grades; read only when a job kind
	// is graded by a judge.
	grades []receipts.GradeRecord
	// verdicts are, in a card sub-study, the stored preflight verdicts by
	// arm; nil in a comparison study.
	verdicts map[string]preflight.Verdict
	// echoes are the trials (by studies.TrialKey) whose kept output repeats
	// its prompt; they shape the stop-cap warning.
	echoes map[string]bool
	// seq is the execution's early-stopping record, nil when its design
	// has no stopping rule.
	seq *analysis.Sequential
}

// stopStore is the store's early-stopping record, read when a design has
// a stopping rule.
type stopStore interface {
	Stop(ctx context.Context, executionID string) (json.RawMessage, bool, error)
}

// inputStore is the part of the store the report path reads.
type inputStore interface {
	Receipts(ctx context.Context, executionID string) ([]receipts.Receipt, error)
	Grades(ctx context.Context, executionID string) ([]receipts.GradeRecord, error)
	run.PreflightReader
}

// readInputs reads what an analysis of execID (the latest finished
// execution when empty) needs, once.
func (s *Service) readInputs(ctx context.Context, name, execID string) (*reportInputs, error) {
	if execID != "" {
		if _, err := s.execution(name, execID); err != nil {
			return nil, err
		}
	}
	snap, d, err := s.frozen(name)
	if err != nil {
		return nil, err
	}
	if execID == "" {
		l, err := s.lifecycle(name)
		if err != nil {
			return nil, err
		}
		if len(l.Finished) == 0 {
			return nil, fmt.Errorf("study %s has no finished execution to analyse", name)
		}
		execID = l.Finished[len(l.Finished)-1]
	}
	st, err := s.store(name)
	if err != nil {
		return nil, err
	}
	x, err := s.execution(name, execID)
	if err != nil {
		return nil, err
	}
	in := &reportInputs{name: name, execID: execID, snap: snap, design: d, echoes: s.promptEchoes(name, execID)}
	var p studies.Plan
	if err := atomicfile.ReadJSON(x.Plan(), &p); err == nil {
		in.plan = &p
	}
	if err := in.readStore(ctx, st); err != nil {
		return nil, err
	}
	return in, nil
}

// readStore reads the execution's receipts, its grades when a judge grades
// a job kind, and a card sub-study's preflight verdicts. A verdict that
// cannot be read fails the request: without it the cells that do not fit
// would be ranked.
func (in *reportInputs) readStore(ctx context.Context, st inputStore) error {
	var err error
	if in.receipts, err = st.Receipts(ctx, in.execID); err != nil {
		return err
	}
	if slices.ContainsFunc(in.design.JobKinds, func(jk studies.JobKind) bool { return jk.Grader.Name == studies.JudgeGrader }) {
		if in.grades, err = st.Grades(ctx, in.execID); err != nil {
			return err
		}
	}
	if ss, ok := st.(stopStore); ok && in.design.Stopping != nil {
		raw, found, err := ss.Stop(ctx, in.execID)
		if err != nil {
			return err
		}
		if found {
			var seq analysis.Sequential
			if err := json.Unmarshal(raw, &seq); err != nil {
				return fmt.Errorf("execution %s: its early-stopping record: %w (rig study check %s)", in.execID, err, in.name)
			}
			in.seq = &seq
		}
	}
	if in.design.IsCardStudy() {
		if in.verdicts, err = run.ReadCardVerdicts(ctx, st, in.design); err != nil {
			return fmt.Errorf("study %s: %w; without it rig cannot tell which cells fit and ranks none (check the store: rig study check %s; rig study preflight %s decides the cells with no verdict)",
				in.name, err, in.name, in.name)
		}
	}
	return nil
}

// receiptTrials maps receipts (every attempt, in key order) and the plan, if
// read, onto the analysis's trials.
func receiptTrials(recs []receipts.Receipt, plan *studies.Plan, designHash string, metrics ...string) []analysis.Trial {
	key := func(arm, kind, task string, repeat int) string {
		return arm + "|" + kind + "|" + task + "|" + fmt.Sprint(repeat)
	}
	counted := map[string]bool{}
	for _, r := range recs {
		if r.Outcome.Counted() {
			counted[key(r.Arm, r.JobKind, r.TaskID, r.Repeat)] = true
		}
	}
	var out []analysis.Trial
	failed := map[string]int{} // key -> index in out of its missing trial
	for _, r := range recs {
		k := key(r.Arm, r.JobKind, r.TaskID, r.Repeat)
		if r.Outcome == receipts.Error && !counted[k] {
			reason := "error: " + cmp.Or(studies.FirstLine(r.Detail), "no detail recorded")
			if i, ok := failed[k]; ok {
				out[i].Reason = reason // the latest attempt's reason
				continue
			}
			failed[k] = len(out)
			out = append(out, analysis.Trial{DesignHash: r.DesignHash, Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat, Missing: true, Reason: reason})
			continue
		}
		t := analysis.Trial{DesignHash: r.DesignHash, Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat,
			WallSeconds: float64(r.WallMS) / 1000, PeakMemoryBytes: r.PeakMemoryBytes,
			// No power meter on a CPU-only machine: energy is wall time at the
			// package's nominal draw, labelled as an estimate.
			EnergyJoules: float64(r.WallMS) / 1000 * studies.EstimatedWatts, EnergySource: analysis.EnergyEstimate,
			PromptTokS: r.PromptPerSecond, GenTokS: r.OutputPerSecond, TTFTMS: r.TTFTMS, TPOTMS: r.TPOTMS,
			Metrics: metricsOf(r, metrics)}
		if r.EnergySource == receipts.EnergyMeasuredNVML {
			// The card's counter measured this trial: the estimate stays
			// only where no counter exists.
			t.EnergyJoules, t.EnergySource = r.EnergyJoules, analysis.EnergyNVML
		}
		switch r.Outcome {
		case receipts.Preempted, receipts.Error:
			t.Preempted = true
		case receipts.FailedAtCard:
			t.BudgetBlown = true
		case receipts.Capped:
			t.Capped = true
		}
		if r.Truncated && r.Outcome.Counted() {
			t.Truncated = true
			t.StopCap, _ = strconv.Atoi(r.Pins["stop_cap"])
		}
		if r.Grade != nil {
			t.Score, t.Pass = r.Grade.Score, r.Grade.Pass
		}
		out = append(out, t)
	}
	if plan != nil {
		for _, p := range plan.Trials {
			k := key(p.Key.Arm, p.Key.JobKind, p.Key.Task, p.Key.Repeat)
			if _, ok := failed[k]; ok || counted[k] {
				continue
			}
			out = append(out, analysis.Trial{DesignHash: designHash, Arm: p.Key.Arm, JobKind: p.Key.JobKind, Task: p.Key.Task, Repeat: p.Key.Repeat, Missing: true, Reason: "no counted receipt"})
		}
	}
	return out
}

// Analysis is one execution's analysis with the inputs it read.
type Analysis struct {
	Study     string `json:"study"`
	Execution string `json:"execution"`
	// Seed is the analysis seed, drawn from the design (SeedFrom says how).
	Seed     uint64           `json:"seed"`
	SeedFrom string           `json:"seed_from"`
	Input    analysis.Input   `json:"input"`
	Report   *analysis.Report `json:"report"`
}

// Analyse runs the pre-registered analysis on an execution (the latest
// finished one when execID is empty).
func (s *Service) Analyse(ctx context.Context, name, execID string) (*Analysis, error) {
	in, err := s.readInputs(ctx, name, execID)
	if err != nil {
		return nil, err
	}
	return analyse(ctx, in)
}

// analyse runs the analysis on what readInputs read. A card sub-study's
// cells the preflight says do not fit are left out: not ranked.
func analyse(ctx context.Context, in *reportInputs) (*Analysis, error) {
	trials := judgedTrials(in.design, in.grades, receiptTrials(in.receipts, notRunPlan(in.plan, in.seq), in.snap.DesignHash, receiptMetrics(in.design)...))
	for i, t := range trials {
		trials[i].RepeatsPrompt = in.echoes[studies.TrialKey{Arm: t.Arm, JobKind: t.JobKind, Task: t.Task, Repeat: t.Repeat}.String()]
	}
	ai := withoutCells(analysis.Input{Design: analysisDesign(in.design, in.snap.DesignHash), Trials: trials, Sequential: in.seq}, doesntFit(in.design, in.verdicts))
	judgeIDs(&ai.Design, in.design, in.snap)
	rep, err := analysis.Analyse(ctx, ai)
	if err != nil {
		return nil, err
	}
	return &Analysis{Study: in.name, Execution: in.execID, Seed: ai.Design.Seed, SeedFrom: analysis.SeedFrom, Input: ai, Report: rep}, nil
}

// ReportFiles are the paths `rig study report` wrote.
type ReportFiles struct {
	HTML     string `json:"html"`
	JSON     string `json:"json"`
	Markdown string `json:"markdown"`
	Summary  string `json:"summary"`
}

// Report analyses an execution and writes the self-contained HTML report
// with its JSON and Markdown twins under the study's reports/ directory.
func (s *Service) Report(ctx context.Context, name string, opts ReportOptions) (ReportFiles, error) {
	in, err := s.readInputs(ctx, name, opts.Execution)
	if err != nil {
		return ReportFiles{}, err
	}
	a, err := analyse(ctx, in)
	if err != nil {
		return ReportFiles{}, err
	}
	if opts.ReplaySample > 0 {
		if _, err := s.ReplaySample(ctx, name, a.Execution, opts.ReplaySample); err != nil {
			return ReportFiles{}, fmt.Errorf("replaying a sample of %s's generation records: %w", a.Execution, err)
		}
	}
	data := s.reportData(in, a)
	sd, err := s.study(name)
	if err != nil {
		return ReportFiles{}, err
	}
	dir, err := sd.Report(a.Execution)
	if err != nil {
		return ReportFiles{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ReportFiles{}, err
	}
	files := ReportFiles{HTML: filepath.Join(dir, "report.html"), JSON: filepath.Join(dir, "report.json"), Markdown: filepath.Join(dir, "report.md")}
	for path, write := range map[string]func(w io.Writer) error{
		files.HTML:     func(w io.Writer) error { return report.WriteHTML(w, data) },
		files.JSON:     func(w io.Writer) error { return report.WriteJSON(w, data) },
		files.Markdown: func(w io.Writer) error { return report.WriteMarkdown(w, data) },
	} {
		if err := atomicfile.Write(path, 0o600, write); err != nil {
			return ReportFiles{}, err
		}
	}
	var sb strings.Builder
	a.Report.WriteSummary(&sb)
	files.Summary = sb.String()
	if err := atomicfile.WriteJSON(filepath.Join(dir, "analysis.json"), a, 0o600); err != nil {
		return ReportFiles{}, err
	}
	return files, nil
}

func num(n analysis.Num) float64 { return float64(n) }

func numPtr(n analysis.Num) *float64 {
	if !n.Valid() {
		return nil
	}
	v := float64(n)
	return &v
}

// reportData maps the analysis and what the request read onto the report.
// Besides in, it reads only the study's own files: its registration's
// licences, the execution's generation records and kept replay, and the
// recorded decision.
func (s *Service) reportData(in *reportInputs, a *Analysis) report.Data {
	name, d, snap := in.name, in.design, in.snap
	rep := a.Report
	data := report.Data{Study: name, DesignHash: snap.DesignHash, ComparisonHash: rep.ComparisonHash, GeneratedAt: time.Now().UTC(),
		AnalysisSeed: a.Seed, AnalysisSeedFrom: a.SeedFrom,
		Sentences: report.Sentences{JobKinds: d.Sentences.JobKindsAndDecisions, Candidates: d.Sentences.CandidatesAndHowRun, Measure: d.Sentences.WhyTheMeasure}}
	data.Stop = stopData(rep.Sequential)
	// The verdicts as the study's own registry gives them, not the bundled one.
	// Only the registry is read from the registration: its design is the
	// snapshot's, already parsed.
	var lines []string
	var reg studies.Registration
	if sd, err := s.study(name); err == nil && atomicfile.ReadJSON(sd.Registration(), &reg) == nil {
		lines, _ = studies.LicenceLinesFor(d.Items, reg.Licences)
	}
	for i, it := range d.Items {
		verdict := ""
		if i < len(lines) {
			line, _, _ := strings.Cut(lines[i], ") from ")
			if _, rest, ok := strings.Cut(line+")", ": "); ok {
				_, v, _ := strings.Cut(rest, ", ")
				verdict = strings.TrimSuffix(v, ")")
			}
		}
		use, v, _ := strings.Cut(verdict, ": ")
		data.Licences = append(data.Licences, report.Licence{Item: it.Name, Entry: it.RegistryID, Use: cmp.Or(use, it.Use), Verdict: v})
	}
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
	if len(in.receipts) > 0 {
		data.Machine = in.receipts[0].Machine
	}
	outputs := s.outputsByTrial(name, a.Execution)
	data.Replay = s.replaySection(name, a.Execution)
	src := s.rowSources(context.Background(), in, outputs, data.Replay)
	perTask := analysis.PerTask(a.Input)
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
					ChallengerScore: 1, BaselineScore: 0, ChallengerOutput: outputs[p.Candidate+"|"+t], BaselineOutput: outputs[p.Baseline+"|"+t]})
			}
			for _, t := range p.NewlyFailing {
				jk.Paired = append(jk.Paired, report.PairedRow{Task: t, Challenger: p.Candidate, Baseline: p.Baseline, Change: report.NewlyFailing,
					ChallengerScore: 0, BaselineScore: 1, ChallengerOutput: outputs[p.Candidate+"|"+t], BaselineOutput: outputs[p.Baseline+"|"+t]})
			}
		}
		for _, f := range failureCounts(in.receipts, k.JobKind, judgedPass(d, k.JobKind, a.Input.Trials)) {
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
			kindRows(&jk, perTask[ki], a.Input.Design, src)
		}
		data.Kinds = append(data.Kinds, jk)
	}
	data.Cards = cardTable(in, a)
	var unfit []string
	for arm, v := range doesntFit(d, in.verdicts) {
		unfit = append(unfit, fmt.Sprintf("%s doesn't fit at card %s (%s): not ranked.", arm, v.Profile.Name, v.Reason))
	}
	sort.Strings(unfit)
	data.Warnings = append(data.Warnings, unfit...)
	for _, w := range rep.Warnings {
		data.Warnings = append(data.Warnings, w.String())
	}
	measured := 0
	for _, r := range in.receipts {
		if r.EnergySource == receipts.EnergyMeasuredNVML {
			measured++
		}
	}
	switch {
	case measured == 0:
		data.Warnings = append(data.Warnings, "Energy is estimated from wall time at a nominal package draw: this machine exposes no power counter (no NVML, no readable RAPL).")
	case measured < len(in.receipts):
		data.Warnings = append(data.Warnings, fmt.Sprintf("Energy is measured by the card's NVML counter on %d of %d receipts; the rest are estimated from wall time, and each arm's figure is labelled by its weakest source.", measured, len(in.receipts)))
	}
	dec := rep.Decision
	data.Decision = &report.Decision{Rule: d.DecisionRule.Text, Trace: dec.Trace, Outcome: dec.Action, NextBaseline: dec.NextBaseline,
		Rationale: "evaluated by rig from the pre-registered rule; not yet recorded with rig study decide"}
	for _, c := range rep.Constraints {
		data.Decision.Constraints = append(data.Decision.Constraints, report.Constraint{Clause: c.Clause, Metric: c.Metric, JobKind: c.JobKind,
			Challenger: c.Candidate, Baseline: c.Baseline, Limit: c.Limit, Reading: c.Reading, Blocks: c.Blocks})
	}
	if rec, err := s.decision(name); err == nil {
		data.Decision.Actor, data.Decision.At, data.Decision.Rationale = rec.Actor, rec.At, rec.Rationale
	}
	return data
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// generationRows calls each for every row of the execution's generation
// records, in file order; a record that does not read is passed over (the
// report's sample and echo checks are best effort, the record's own check
// is rig study check's).
func (s *Service) generationRows(name, execID string, each func(genrecord.Row)) {
	x, err := s.execution(name, execID)
	if err != nil {
		return
	}
	files, _ := filepath.Glob(x.Generations())
	for _, f := range files {
		_, rows, err := genrecord.ReadAll(f)
		if err != nil {
			continue
		}
		for _, r := range rows {
			each(r)
		}
	}
}

// outputsByTrial returns, per arm and task, the kept text of the first repeat.
func (s *Service) outputsByTrial(name, execID string) map[string]string {
	out := map[string]string{}
	s.generationRows(name, execID, func(r genrecord.Row) {
		key, _, _ := strings.Cut(r.Prompt, "#")
		parts := strings.Split(key, "/")
		if len(parts) < 3 {
			return
		}
		k := parts[0] + "|" + parts[2]
		if _, ok := out[k]; !ok {
			out[k] = r.Text
		}
	})
	return out
}

// promptEchoes returns the trials (by studies.TrialKey) whose kept model
// call repeats its rendered prompt instead of answering it
// (analysis.EchoesPrompt). Only a candidate's own call is read, not a
// harness's calls nor a judge's.
func (s *Service) promptEchoes(name, execID string) map[string]bool {
	out := map[string]bool{}
	s.generationRows(name, execID, func(r genrecord.Row) {
		if r.Role == genrecord.RoleCandidate && analysis.EchoesPrompt(r.RenderedPrompt, r.Text) {
			key, _, _ := strings.Cut(r.Prompt, "#") // the trial key, without the attempt
			out[key] = true
		}
	})
	return out
}

// judgedPass is, for a job kind a judge grades, the judge's pass per
// arm|task|repeat (what the analysis ranked on); nil for other job kinds.
func judgedPass(d *studies.Design, jobKind string, trials []analysis.Trial) map[string]bool {
	judged := false
	for _, jk := range d.JobKinds {
		judged = judged || (jk.Name == jobKind && jk.Grader.Name == studies.JudgeGrader)
	}
	if !judged {
		return nil
	}
	out := map[string]bool{}
	for _, t := range trials {
		if t.JobKind == jobKind && !t.Missing && !t.Preempted {
			out[t.Arm+"|"+t.Task+"|"+fmt.Sprint(t.Repeat)] = t.Pass
		}
	}
	return out
}

// failureCounts counts one job kind's non-passing receipts by arm and code.
// For a judged job kind, pass is the judge's (judged), and a trial the judge
// never graded is counted as ungraded rather than failed.
// An error is counted under its reason, and only when no later attempt of
// the trial was counted: a rerun that succeeded is not a failure.
func failureCounts(recs []receipts.Receipt, jobKind string, judged map[string]bool) []report.Failure {
	counted := map[string]bool{}
	for _, r := range recs {
		if r.Outcome.Counted() {
			counted[r.Arm+"|"+r.JobKind+"|"+r.TaskID+"|"+fmt.Sprint(r.Repeat)] = true
		}
	}
	count := map[[2]string]int{}
	for _, r := range recs {
		if r.JobKind != jobKind {
			continue
		}
		code := ""
		if judged != nil && r.Outcome == receipts.Scored {
			pass, graded := judged[r.Arm+"|"+r.TaskID+"|"+fmt.Sprint(r.Repeat)]
			switch {
			case !graded:
				code = "not graded by the judge"
			case !pass && r.Truncated:
				code = "failed (judge): truncated at the stop cap"
			case !pass:
				code = "failed (judge): wrong answer"
			}
			if code != "" {
				count[[2]string{r.Arm, code}]++
			}
			continue
		}
		switch {
		case r.Outcome == receipts.Scored && r.Grade != nil && !r.Grade.Pass && r.Truncated:
			code = "failed: truncated at the stop cap"
		case r.Outcome == receipts.Scored && r.Grade != nil && !r.Grade.Pass:
			code = "failed: wrong answer"
		case r.Outcome == receipts.Error && counted[r.Arm+"|"+r.JobKind+"|"+r.TaskID+"|"+fmt.Sprint(r.Repeat)]:
		case r.Outcome == receipts.Error:
			code = "error: " + cmp.Or(studies.FirstLine(r.Detail), "no detail recorded")
		case r.Outcome == receipts.Capped && r.Truncated:
			code = "capped: truncated at the stop cap"
		case r.Outcome != receipts.Scored:
			code = string(r.Outcome)
		}
		if code != "" {
			count[[2]string{r.Arm, code}]++
		}
	}
	var out []report.Failure
	for k, n := range count {
		out = append(out, report.Failure{Arm: k[0], Code: k[1], Count: n})
	}
	return out
}

// notRunPlan is the plan without the trials an early stop left unrun, so
// they are not reported missing: they were never meant to run.
func notRunPlan(plan *studies.Plan, seq *analysis.Sequential) *studies.Plan {
	if plan == nil || seq == nil || !seq.StoppedEarly {
		return plan
	}
	skip := map[string]bool{}
	for _, k := range seq.NotRun {
		skip[k] = true
	}
	p := *plan
	p.Trials = nil
	for _, t := range plan.Trials {
		if !skip[fmt.Sprintf("%s|%s|%s#%d", t.Key.Arm, t.Key.JobKind, t.Key.Task, t.Key.Repeat)] {
			p.Trials = append(p.Trials, t)
		}
	}
	return &p
}

// stopData maps the early-stopping record onto the report's view of it.
func stopData(seq *analysis.Sequential) *report.Stop {
	if seq == nil {
		return nil
	}
	st := &report.Stop{Method: string(seq.Stopping.Method), Spending: string(seq.Stopping.Spending), Stopped: seq.StoppedEarly,
		Check: seq.Look.Check + 1, Reason: seq.Look.Reason, NotRun: len(seq.NotRun)}
	opt := func(n analysis.Num) *float64 {
		if v := float64(n); !math.IsNaN(v) && !math.IsInf(v, 0) {
			return &v
		}
		return nil
	}
	for i, pl := range seq.Look.Pairs {
		sp := report.StopPair{JobKind: pl.JobKind, Challenger: pl.Pair.Candidate, Baseline: pl.Pair.Baseline, Status: string(pl.Status),
			Direction: pl.Direction, Tasks: pl.Tasks, P: float64(pl.P), PHolm: float64(pl.P),
			CSLo: float64(pl.CS.Lo), CSHi: float64(pl.CS.Hi), CSLevel: pl.CS.Level, Statistic: "wins − losses"}
		if seq.Stopping.Method == analysis.Anytime {
			sp.Statistic = "e-value"
		}
		if i < len(seq.Look.HolmP) {
			sp.PHolm = seq.Look.HolmP[i]
		}
		for _, pt := range pl.Path {
			sp.Path = append(sp.Path, report.StopPoint{Tasks: pt.Tasks, Look: pt.Look, Statistic: pt.Statistic,
				Boundary: opt(pt.Boundary), FutilityBound: opt(pt.FutilityBound), Status: string(pt.Status)})
			if pt.Fraction > 0 {
				sp.Planned = int(math.Round(float64(pt.Tasks) / pt.Fraction))
			}
		}
		st.Pairs = append(st.Pairs, sp)
	}
	return st
}

// speedCard is one arm's analysed speed card as the report shows it.
func speedCard(s analysis.Speed) report.Speed {
	out := report.Speed{Arm: s.Arm, Timed: s.Timed, PromptTokS: numPtr(s.PromptTokS), GenTokS: numPtr(s.GenTokS),
		TTFTP50MS: numPtr(s.TTFTP50MS), TTFTP99MS: numPtr(s.TTFTP99MS), TPOTP50MS: numPtr(s.TPOTP50MS), TPOTP99MS: numPtr(s.TPOTP99MS),
		WallSeconds: numPtr(s.Cost.MeanWallSeconds), EnergyJoules: numPtr(s.Cost.MeanEnergyJoules), EnergySource: string(s.Cost.EnergySource)}
	if p := s.Cost.PeakMemoryBytes; p > 0 {
		out.PeakMemBytes = &p
	}
	if d := s.Delta; d != nil {
		out.Delta = &report.SpeedDelta{PromptTokS: numPtr(d.PromptTokS), GenTokS: numPtr(d.GenTokS),
			TTFTP50: numPtr(d.TTFTP50), TTFTP99: numPtr(d.TTFTP99), TPOTP50: numPtr(d.TPOTP50), TPOTP99: numPtr(d.TPOTP99),
			Wall: numPtr(d.Wall), PeakMem: numPtr(d.PeakMemory), Energy: numPtr(d.Energy)}
	}
	return out
}

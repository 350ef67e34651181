package report

import (
	"rig/internal/wording"

	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes the report as Markdown: the same tables and words as
// the HTML, without figures (their data is in the tables and the JSON).
// Model outputs go in fenced blocks longer than any backtick run they hold,
// and table cells have their pipes and newlines escaped.
func WriteMarkdown(w io.Writer, d Data) error {
	if err := d.Validate(); err != nil {
		return err
	}
	m := &mdWriter{b: bufio.NewWriter(w)}
	m.header(d)
	if d.Stop != nil {
		m.stop(d.Stop)
	}
	if d.Decision != nil {
		m.decision(d.Decision, d.ComparisonHash)
	}
	m.warnings(d.Warnings)
	for _, k := range d.Kinds {
		m.kind(k)
	}
	if d.Cards != nil {
		m.cards(d.Cards)
	}
	if d.Replay != nil {
		m.replay(d.Replay)
	}
	m.licences(d.Licences)
	if err := m.b.Flush(); err != nil {
		return fmt.Errorf("report: write Markdown: %w", err)
	}
	return nil
}

// mdWriter writes Markdown text and tables; each method below is one
// section of the report.
type mdWriter struct{ b *bufio.Writer }

func (m *mdWriter) p(format string, args ...any) { fmt.Fprintf(m.b, format, args...) }

// row writes one table row, each cell kept on one line with its pipes escaped.
func (m *mdWriter) row(cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	m.p("| %s |\n", strings.Join(cells, " | "))
}

// head writes a table's header row and its separator.
func (m *mdWriter) head(cells ...string) {
	m.row(cells...)
	seps := make([]string, len(cells))
	for i := range seps {
		seps[i] = "---"
	}
	m.p("|%s|\n", strings.Join(seps, "|"))
}

// header is the title, the hashes, the seed, the machine and the three
// sentences.
func (m *mdWriter) header(d Data) {
	m.p("# %s\n\n", line(d.Study))
	m.p("- Generated: %s\n- Design hash: `%s`\n- Comparison hash: `%s`\n", when(d.GeneratedAt), line(d.DesignHash), line(d.ComparisonHash))
	m.p("- Analysis seed: `%d`", d.AnalysisSeed)
	if d.AnalysisSeedFrom != "" {
		m.p(" (%s)", line(d.AnalysisSeedFrom))
	}
	m.p("\n- Machine: %s\n\n", orMissing(line(d.Machine)))
	m.p("## The check in three sentences\n\n1. %s\n2. %s\n3. %s\n\n", line(d.Sentences.JobKinds), line(d.Sentences.Candidates), line(d.Sentences.Measure))
}

// stop is the early-stopping section: each pair's state, then its path
// against the boundary, check by check.
func (m *mdWriter) stop(st *Stop) {
	m.p("## Early stopping\n\n%s\n\n", line(st.Line()))
	m.head("pair", "job kind", "status", "paired tasks", "sequential p", "p (Holm)", "interval")
	for _, sp := range st.Pairs {
		status := sp.Status
		if sp.Direction != "" {
			status += " (" + sp.Direction + " leads)"
		}
		m.row(sp.Challenger+" vs "+sp.Baseline, sp.JobKind, status, fmt.Sprintf("%d of %d", sp.Tasks, sp.Planned), pval(sp.P), pval(sp.PHolm), sp.IntervalText())
	}
	m.p("\n")
	for _, sp := range st.Pairs {
		m.p("Path of %s vs %s (%s against its boundary, per check):\n\n", line(sp.Challenger), line(sp.Baseline), sp.Statistic)
		m.head("check", "paired tasks", "look", "statistic", "boundary", "futility bound", "status")
		for i, pt := range sp.Path {
			m.row(fmt.Sprint(i+1), fmt.Sprint(pt.Tasks), fmt.Sprint(pt.Look), fmt.Sprintf("%.4g", pt.Statistic), stopBound(pt.Boundary), stopBound(pt.FutilityBound), pt.Status)
		}
		m.p("\n")
	}
}

// amendments are the corrections appended to the decision, each labelled
// with who made it and when; the decision above them stays as recorded.
func (m *mdWriter) amendments(as []Amendment) {
	if len(as) == 0 {
		return
	}
	m.p("Amendments (appended later; the decision above stays as recorded):\n\n")
	for _, a := range as {
		m.p("- **Amendment %d**, by %s", a.Seq, line(a.Actor))
		if !a.At.IsZero() {
			m.p(" at %s", when(a.At))
		}
		m.p(": %s\n", line(a.Rationale))
	}
	m.p("\n")
}

// decision is the outcome, who recorded it against which comparison, the
// rule as written, how the rule reached it and the guardrails.
func (m *mdWriter) decision(dc *Decision, comparisonHash string) {
	if dc.Actor != "" {
		m.p("## Decision\n\n**%s**, recorded by %s", line(dc.Outcome), line(dc.Actor))
		if !dc.At.IsZero() {
			m.p(" at %s", when(dc.At))
		}
		m.p(" against comparison `%s`.", line(comparisonHash))
	} else {
		m.p("## Decision\n\n**%s**, not yet recorded (rig study decide records it, citing comparison `%s`).", line(dc.Outcome), line(comparisonHash))
	}
	if dc.NextBaseline != "" {
		m.p(" Next baseline: **%s**.", line(dc.NextBaseline))
	}
	m.p("\n\n")
	if dc.Rationale != "" {
		m.p("%s\n\n", line(dc.Rationale))
	}
	m.amendments(dc.Amendments)
	m.p("Rule, as written before any run:\n\n%s\n", fenced(dc.Rule))
	if len(dc.Trace) > 0 {
		m.p("How the rule reached it:\n\n")
		for i, t := range dc.Trace {
			m.p("%d. %s\n", i+1, line(t))
		}
		m.p("\n")
	}
	if len(dc.Constraints) > 0 {
		m.p("Guardrails and winner policy (each can block a winner, none can make one):\n\n")
		m.head("clause", "metric", "job kind", "pair", "reading", "limit", "verdict")
		for _, c := range dc.Constraints {
			m.row(c.Clause, c.Metric, c.JobKind, c.Challenger+" vs "+c.Baseline, c.Reading, c.Limit, c.Verdict())
		}
		m.p("\n")
	}
}

func (m *mdWriter) warnings(ws []string) {
	if len(ws) == 0 {
		return
	}
	m.p("## Warnings\n\n")
	for _, wn := range ws {
		m.p("- %s\n", line(wn))
	}
	m.p("\n")
}

// kind is one job kind's section: its measure and leader, the arms, then
// each of its tables and lists.
func (m *mdWriter) kind(k Kind) {
	m.p("## Job kind: %s\n\n", line(k.Name))
	measure, dir := rankingMeasure(k)
	m.p("Ranking measure **%s** (%s), gate %s, interval: %s, P(best) bar %.2f, Holm at α = %.2f", line(measure), dir, num(k.Gate), line(k.Interval), k.BestBar, k.Alpha)
	m.p("; %s.\n\n", detectableText(k))
	if a := leader(k); a != nil {
		m.p("**%s**\n\n", line(leaderText(k, *a)))
	} else if h := noLeader(k); h != "" {
		m.p("**%s**\n\n", line(h))
	}
	m.arms(k)
	m.latency(k)
	speedMarkdown(k, m.p, m.head, m.row)
	m.pairs(k)
	if k.Fidelity != nil {
		m.fidelity(*k.Fidelity)
	}
	m.sweep(k)
	m.cost(k)
	m.paired(k)
	if k.SRM != nil {
		m.p("### Sample ratio\n\n%s\n\n", k.SRM.Text())
	}
	m.failures(k)
	m.taskLists(k)
}

func (m *mdWriter) arms(k Kind) {
	m.head("arm", "runtime", "digest", k.Measure+" [interval]", "pass rate", "median", "p10", "worst", "P(best)", "tasks", "trials", "preempted", "capped", "wall time", "peak memory", "energy")
	for _, a := range k.Arms {
		name := a.Arm
		if a.Baseline {
			name += " (baseline)"
		}
		if a.Tie {
			name += " (tie)"
		}
		m.row(name, a.Runtime, short(a.Digest), interval(a.Score), pct(a.PassRate), num(a.Median), num(a.P10), num(a.Worst), fmt.Sprintf("%.2f", a.PBest),
			fmt.Sprint(a.Tasks), fmt.Sprint(a.Trials), fmt.Sprint(a.Preempted), fmt.Sprint(a.Capped),
			secondsText(a.WallSeconds), bytesText(a.PeakMemBytes), energyText(a.EnergyJoules, a.EnergySource))
	}
	m.p("\n")
}

func (m *mdWriter) latency(k Kind) {
	if len(k.Latency) == 0 {
		return
	}
	m.p("### Latency per trial\n\n")
	m.head("arm", "timed trials", "p50", "p95", "Δ p50 vs baseline", "Δ p95 vs baseline")
	for _, l := range k.Latency {
		m.row(l.Arm, fmt.Sprint(l.Trials), msText(l.P50MS), msText(l.P95MS), deltaMSText(l.DeltaP50MS), deltaMSText(l.DeltaP95MS))
	}
	m.p("\n")
}

func (m *mdWriter) pairs(k Kind) {
	if len(k.Pairs) == 0 {
		return
	}
	m.p("### Named pairs\n\n")
	m.head("pair", "Δ [interval]", "test", "p", "p (Holm)", "outcome", "reading", "missing pairs")
	for _, pr := range k.Pairs {
		m.row(pr.Challenger+" vs "+pr.Baseline, deltaText(pr.Delta), pr.Test, pval(pr.PRaw), pval(pr.PHolm), wording.Outcome(pr.Outcome), readingOf(k, pr), MissingText(pr))
	}
	m.p("\n")
}

// fidelity is the job kind's fidelity to its reference: what it measures,
// each arm beside its pass rate, then the named pairs' differences.
func (m *mdWriter) fidelity(f Fidelity) {
	m.p("### %s\n\n", line(f.Heading()))
	for _, w := range f.Words() {
		m.p("%s\n\n", line(w))
	}
	cols := []string{"arm"}
	if f.Profiles() {
		cols = append(cols, "profile")
	}
	m.head(append(cols, "tasks", "tokens", "mean KL (nats/token) [interval]", "p99 KL [interval]", "top-token agreement [interval]", "P(reference's token)", "pass rate")...)
	for _, a := range f.Arms {
		cells := []string{a.Label()}
		if f.Profiles() {
			cells = append(cells, orMissing(a.Profile))
		}
		m.row(append(cells, fmt.Sprint(a.Tasks), fmt.Sprint(a.Tokens), klText(a.MeanKL), klText(a.P99KL), shareText(a.TopAgreement), probText(a.RefTokenProb), a.PassRateText())...)
	}
	m.p("\n")
	if len(f.Pairs) > 0 {
		m.p("%s\n\n", line(f.PairWords()))
		m.head("pair", "Δ mean KL [interval]", "Δ p99 KL [interval]", "Δ top-token agreement [interval]")
		for _, pr := range f.Pairs {
			m.row(pr.Challenger+" vs "+pr.Baseline, klDeltaText(pr.MeanKL), klDeltaText(pr.P99KL), shareDeltaText(pr.TopAgreement))
		}
		m.p("\n")
	}
	for _, n := range f.Notes {
		m.p("- %s\n", line(n))
	}
	if len(f.Notes) > 0 {
		m.p("\n")
	}
}

func (m *mdWriter) sweep(k Kind) {
	s := k.Sweep
	if s == nil || len(s.Gates) == 0 {
		return
	}
	m.p("### Threshold sweep\n\n")
	cols := []string{"gate"}
	for _, l := range s.Lines {
		cols = append(cols, l.Arm)
	}
	m.head(cols...)
	for i, g := range s.Gates {
		cells := []string{num(g)}
		for _, l := range s.Lines {
			cells = append(cells, pct(l.PassRate[i]))
		}
		m.row(cells...)
	}
	m.p("\n")
}

func (m *mdWriter) cost(k Kind) {
	c := k.Cost
	if c == nil || len(c.Points) == 0 {
		return
	}
	m.p("### Cost against score\n\n")
	m.head("arm", c.Label, k.Measure)
	for _, pt := range c.Points {
		m.row(pt.Arm, fmt.Sprintf("%.4g", pt.Cost), num(pt.Score))
	}
	m.p("\n")
}

// paired shows each task that flipped with both outputs, fenced.
func (m *mdWriter) paired(k Kind) {
	if len(k.Paired) == 0 {
		return
	}
	m.p("### Paired rows: tasks that flipped\n\n")
	for _, r := range k.Paired {
		m.p("#### %s — %s (%s vs %s)\n\n", line(r.Task), strings.ReplaceAll(string(r.Change), "_", " "), line(r.Challenger), line(r.Baseline))
		m.p("%s (baseline), score %s:\n\n%s\n", line(r.Baseline), num(r.BaselineScore), fenced(r.BaselineOutput))
		m.p("%s, score %s:\n\n%s\n", line(r.Challenger), num(r.ChallengerScore), fenced(r.ChallengerOutput))
	}
}

func (m *mdWriter) failures(k Kind) {
	t := pivotFailures(k)
	if t == nil {
		return
	}
	m.p("### Failures by code\n\n")
	m.head(append(append([]string{"code"}, t.Arms...), "all arms")...)
	for _, r := range t.Rows {
		cells := []string{r.Code}
		for _, n := range r.Counts {
			cells = append(cells, fmt.Sprint(n))
		}
		m.row(append(cells, fmt.Sprint(r.Total))...)
	}
	m.p("\n")
}

// taskLists are the tasks the design left out, the near duplicates and the
// tasks that never produced an output.
func (m *mdWriter) taskLists(k Kind) {
	if len(k.Excluded) > 0 {
		m.p("### Tasks left out by the design\n\n")
		for _, x := range k.Excluded {
			m.p("- %s: %s\n", line(x.Task), line(x.Why))
		}
		m.p("\n")
	}
	if len(k.NearDuplicates) > 0 {
		m.p("### Near-duplicate tasks (kept and counted; %s)\n\n", line(k.NearMethod))
		for _, d := range k.NearDuplicates {
			m.p("- %s and %s: %.2f\n", line(d.A), line(d.B), d.Similarity)
		}
		m.p("\n")
	}
	if len(k.NoOutput) > 0 {
		m.p("### Tasks that never produced an output\n\n")
		for _, n := range k.NoOutput {
			m.p("- %s: %s\n", line(n.Arm), line(strings.Join(n.Tasks, ", ")))
		}
		m.p("\n")
	}
}

func (m *mdWriter) cards(c *Cards) {
	m.p("## Card sub-study\n\n> %s\n\n", CardCaveat)
	cols := []string{"model", "profile", "job kind", "preflight", "prompt tok/s", "gen tok/s", "score [95% interval]", "peak memory", "wall time", "energy"}
	if c.FidelityColumn() {
		cols = append(cols, "fidelity: mean KL [interval]")
	}
	m.head(cols...)
	for _, r := range c.Rows {
		prof := r.Profile + " (real card)"
		if r.Simulated {
			prof = r.Profile + " (simulated)"
		}
		fit := "doesn't fit"
		if r.Fits {
			fit = "fits"
		}
		if r.Verdict != "" {
			fit += ": " + r.Verdict
		}
		cells := []string{r.Model, prof, r.JobKind, fit, optNum(r.PromptTokS, "%.1f"), optNum(r.GenTokS, "%.1f"), r.ScoreText(), bytesText(r.PeakMemBytes), secondsText(r.WallSeconds), energyText(r.EnergyJoules, r.EnergySource)}
		if c.FidelityColumn() {
			cells = append(cells, r.FidelityText())
		}
		m.row(cells...)
	}
	m.p("\n")
}

func (m *mdWriter) replay(r *Replay) {
	m.p("## Replay of generation records\n\nTolerance: %s.\n\n", line(r.Tolerance))
	m.head("record", "arm", "result", "max |Δ log-prob|", "detail")
	for _, x := range r.Rows {
		m.row(x.Record, x.Arm, strings.ReplaceAll(string(x.Status), "_", " "), fmt.Sprintf("%.2e", x.MaxDelta), x.Detail)
	}
	m.p("\n")
}

func (m *mdWriter) licences(ls []Licence) {
	m.p("## Licences\n\n")
	if len(ls) == 0 {
		m.p("No licence entries were given to this report.\n")
	}
	for _, l := range ls {
		m.p("- %s\n", line(l.Line()))
	}
}

// line keeps a value on one line so it cannot start a new Markdown block.
func line(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func cell(s string) string {
	return strings.ReplaceAll(line(s), "|", `\|`)
}

func orMissing(s string) string {
	if s == "" {
		return Missing
	}
	return s
}

// fenced wraps untrusted text in a code fence no backtick run inside it
// can close.
func fenced(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	return fence + "text\n" + strings.TrimRight(s, "\n") + "\n" + fence + "\n"
}

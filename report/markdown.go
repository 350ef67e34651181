package report

import (
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
	b := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	row := func(cells ...string) {
		for i, c := range cells {
			cells[i] = cell(c)
		}
		p("| %s |\n", strings.Join(cells, " | "))
	}
	head := func(cells ...string) {
		row(cells...)
		seps := make([]string, len(cells))
		for i := range seps {
			seps[i] = "---"
		}
		p("|%s|\n", strings.Join(seps, "|"))
	}

	p("# %s\n\n", line(d.Study))
	p("- Generated: %s\n- Design hash: `%s`\n- Comparison hash: `%s`\n", when(d.GeneratedAt), line(d.DesignHash), line(d.ComparisonHash))
	p("- Analysis seed: `%d`", d.AnalysisSeed)
	if d.AnalysisSeedFrom != "" {
		p(" (%s)", line(d.AnalysisSeedFrom))
	}
	p("\n- Machine: %s\n\n", orMissing(line(d.Machine)))
	p("## The check in three sentences\n\n1. %s\n2. %s\n3. %s\n\n", line(d.Sentences.JobKinds), line(d.Sentences.Candidates), line(d.Sentences.Measure))

	if st := d.Stop; st != nil {
		p("## Early stopping\n\n%s\n\n", line(st.Line()))
		head("pair", "job kind", "status", "paired tasks", "sequential p", "p (Holm)", "interval")
		for _, sp := range st.Pairs {
			status := sp.Status
			if sp.Direction != "" {
				status += " (" + sp.Direction + " leads)"
			}
			row(sp.Challenger+" vs "+sp.Baseline, sp.JobKind, status, fmt.Sprintf("%d of %d", sp.Tasks, sp.Planned), fmt.Sprintf("%.4g", sp.P), fmt.Sprintf("%.4g", sp.PHolm), sp.IntervalText())
		}
		p("\n")
		for _, sp := range st.Pairs {
			p("Path of %s vs %s (%s against its boundary, per check):\n\n", line(sp.Challenger), line(sp.Baseline), sp.Statistic)
			head("check", "paired tasks", "look", "statistic", "boundary", "futility bound", "status")
			for i, pt := range sp.Path {
				row(fmt.Sprint(i+1), fmt.Sprint(pt.Tasks), fmt.Sprint(pt.Look), fmt.Sprintf("%.4g", pt.Statistic), stopBound(pt.Boundary), stopBound(pt.FutilityBound), pt.Status)
			}
			p("\n")
		}
	}
	if dc := d.Decision; dc != nil {
		if dc.Actor != "" {
			p("## Decision\n\n**%s**, recorded by %s", line(dc.Outcome), line(dc.Actor))
			if !dc.At.IsZero() {
				p(" at %s", when(dc.At))
			}
			p(" against comparison `%s`.", line(d.ComparisonHash))
		} else {
			p("## Decision\n\n**%s**, not yet recorded (rig study decide records it, citing comparison `%s`).", line(dc.Outcome), line(d.ComparisonHash))
		}
		if dc.NextBaseline != "" {
			p(" Next baseline: **%s**.", line(dc.NextBaseline))
		}
		p("\n\n")
		if dc.Rationale != "" {
			p("%s\n\n", line(dc.Rationale))
		}
		p("Rule, as written before any run:\n\n%s\n", fenced(dc.Rule))
		if len(dc.Trace) > 0 {
			p("How the rule reached it:\n\n")
			for i, t := range dc.Trace {
				p("%d. %s\n", i+1, line(t))
			}
			p("\n")
		}
		if len(dc.Constraints) > 0 {
			p("Guardrails and winner policy (each can block a winner, none can make one):\n\n")
			head("clause", "metric", "job kind", "pair", "reading", "limit", "verdict")
			for _, c := range dc.Constraints {
				row(c.Clause, c.Metric, c.JobKind, c.Challenger+" vs "+c.Baseline, c.Reading, c.Limit, c.Verdict())
			}
			p("\n")
		}
	}
	if len(d.Warnings) > 0 {
		p("## Warnings\n\n")
		for _, wn := range d.Warnings {
			p("- %s\n", line(wn))
		}
		p("\n")
	}

	for _, k := range d.Kinds {
		p("## Job kind: %s\n\n", line(k.Name))
		p("Ranking measure **%s** (%s), gate %s, interval: %s, P(best) bar %.2f, Holm at α = %.2f", line(k.Measure), better(k), num(k.Gate), line(k.Interval), k.BestBar, k.Alpha)
		if k.Detectable != nil {
			p(", detectable at 80%% power: ±%s", num(*k.Detectable))
		}
		p(".\n\n")
		if a := leader(k); a != nil {
			p("**%s**\n\n", line(leaderText(k, *a)))
		} else if h := noLeader(k); h != "" {
			p("**%s**\n\n", line(h))
		}
		head("arm", "runtime", "digest", k.Measure+" [interval]", "pass rate", "median", "p10", "worst", "P(best)", "tasks", "trials", "preempted", "capped", "wall time", "peak memory", "energy")
		for _, a := range k.Arms {
			name := a.Arm
			if a.Baseline {
				name += " (baseline)"
			}
			if a.Tie {
				name += " (tie)"
			}
			row(name, a.Runtime, short(a.Digest), interval(a.Score), pct(a.PassRate), num(a.Median), num(a.P10), num(a.Worst), fmt.Sprintf("%.2f", a.PBest),
				fmt.Sprint(a.Tasks), fmt.Sprint(a.Trials), fmt.Sprint(a.Preempted), fmt.Sprint(a.Capped),
				secondsText(a.WallSeconds), bytesText(a.PeakMemBytes), energyText(a.EnergyJoules, a.EnergySource))
		}
		p("\n")
		if len(k.Latency) > 0 {
			p("### Latency per trial\n\n")
			head("arm", "timed trials", "p50", "p95", "Δ p50 vs baseline", "Δ p95 vs baseline")
			for _, l := range k.Latency {
				row(l.Arm, fmt.Sprint(l.Trials), msText(l.P50MS), msText(l.P95MS), deltaMSText(l.DeltaP50MS), deltaMSText(l.DeltaP95MS))
			}
			p("\n")
		}
		speedMarkdown(k, p, head, row)
		if len(k.Pairs) > 0 {
			p("### Named pairs\n\n")
			head("pair", "Δ [interval]", "test", "p", "p (Holm)", "outcome", "reading", "missing pairs")
			for _, pr := range k.Pairs {
				reading := pr.NotShown
				if reading == "" {
					reading = "no difference shown at α after Holm"
					if pr.PHolm < k.Alpha {
						reading = "shown at α after Holm"
					}
				}
				row(pr.Challenger+" vs "+pr.Baseline, deltaText(pr.Delta), pr.Test, pval(pr.PRaw), pval(pr.PHolm), pr.Outcome, reading, MissingText(pr))
			}
			p("\n")
		}
		if s := k.Sweep; s != nil && len(s.Gates) > 0 {
			p("### Threshold sweep\n\n")
			cols := []string{"gate"}
			for _, l := range s.Lines {
				cols = append(cols, l.Arm)
			}
			head(cols...)
			for i, g := range s.Gates {
				cells := []string{num(g)}
				for _, l := range s.Lines {
					cells = append(cells, pct(l.PassRate[i]))
				}
				row(cells...)
			}
			p("\n")
		}
		if c := k.Cost; c != nil && len(c.Points) > 0 {
			p("### Cost against score\n\n")
			head("arm", c.Label, k.Measure)
			for _, pt := range c.Points {
				row(pt.Arm, fmt.Sprintf("%.4g", pt.Cost), num(pt.Score))
			}
			p("\n")
		}
		if len(k.Paired) > 0 {
			p("### Paired rows: tasks that flipped\n\n")
			for _, r := range k.Paired {
				p("#### %s — %s (%s vs %s)\n\n", line(r.Task), strings.ReplaceAll(string(r.Change), "_", " "), line(r.Challenger), line(r.Baseline))
				p("%s (baseline), score %s:\n\n%s\n", line(r.Baseline), num(r.BaselineScore), fenced(r.BaselineOutput))
				p("%s, score %s:\n\n%s\n", line(r.Challenger), num(r.ChallengerScore), fenced(r.ChallengerOutput))
			}
		}
		if k.SRM != nil {
			p("### Sample ratio\n\n%s\n\n", k.SRM.Text())
		}
		if t := pivotFailures(k); t != nil {
			p("### Failures by code\n\n")
			head(append(append([]string{"code"}, t.Arms...), "all arms")...)
			for _, r := range t.Rows {
				cells := []string{r.Code}
				for _, n := range r.Counts {
					cells = append(cells, fmt.Sprint(n))
				}
				row(append(cells, fmt.Sprint(r.Total))...)
			}
			p("\n")
		}
		if len(k.Excluded) > 0 {
			p("### Tasks left out by the design\n\n")
			for _, x := range k.Excluded {
				p("- %s: %s\n", line(x.Task), line(x.Why))
			}
			p("\n")
		}
		if len(k.NearDuplicates) > 0 {
			p("### Near-duplicate tasks (kept and counted; %s)\n\n", line(k.NearMethod))
			for _, d := range k.NearDuplicates {
				p("- %s and %s: %.2f\n", line(d.A), line(d.B), d.Similarity)
			}
			p("\n")
		}
		if len(k.NoOutput) > 0 {
			p("### Tasks that never produced an output\n\n")
			for _, n := range k.NoOutput {
				p("- %s: %s\n", line(n.Arm), line(strings.Join(n.Tasks, ", ")))
			}
			p("\n")
		}
	}

	if c := d.Cards; c != nil {
		p("## Card sub-study\n\n> %s\n\n", CardCaveat)
		head("model", "profile", "job kind", "preflight", "prompt tok/s", "gen tok/s", "score [95% interval]", "peak memory", "wall time", "energy")
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
			row(r.Model, prof, r.JobKind, fit, optNum(r.PromptTokS, "%.1f"), optNum(r.GenTokS, "%.1f"), r.ScoreText(), bytesText(r.PeakMemBytes), secondsText(r.WallSeconds), energyText(r.EnergyJoules, r.EnergySource))
		}
		p("\n")
	}
	if r := d.Replay; r != nil {
		p("## Replay of generation records\n\nTolerance: %s.\n\n", line(r.Tolerance))
		head("record", "arm", "result", "max |Δ log-prob|", "detail")
		for _, x := range r.Rows {
			row(x.Record, x.Arm, strings.ReplaceAll(string(x.Status), "_", " "), fmt.Sprintf("%.2e", x.MaxDelta), x.Detail)
		}
		p("\n")
	}
	p("## Licences\n\n")
	if len(d.Licences) == 0 {
		p("No licence entries were given to this report.\n")
	}
	for _, l := range d.Licences {
		p("- %s\n", line(l.Line()))
	}
	if err := b.Flush(); err != nil {
		return fmt.Errorf("report: write Markdown: %w", err)
	}
	return nil
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

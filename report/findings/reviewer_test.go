package findings

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rig/analysis"
	"rig/internal/wording"
	"rig/report"
	"rig/studies"
)

// reviewerCase is one study's outcome, built from trials: each arm passes
// the tasks its function says.
type reviewerCase struct {
	name   string
	tasks  int
	pass   map[string]func(task int) bool
	power  *analysis.PowerPlan
	clause []analysis.Clause
	// slow multiplies an arm's wall time; guard is a guardrail on it.
	slow   map[string]float64
	guard  []analysis.Guardrail
	blocks bool // the guardrail must block the winner
	// stop, when set, monitors both pairs every 8 tasks and keeps only the
	// trials run when the study stopped (want: stopped early).
	stop *analysis.Stopping
}

func (c reviewerCase) analyse(t *testing.T) (analysis.Input, *analysis.Report) {
	t.Helper()
	var trials []analysis.Trial
	for i := range c.tasks {
		for _, arm := range []string{"base", "cand", "alt"} {
			wall := 1 + float64(i%3)
			if f, ok := c.slow[arm]; ok {
				wall *= f
			}
			trials = append(trials, analysis.Trial{DesignHash: "d1", Arm: arm, JobKind: "apply", Task: fmt.Sprintf("t%03d", i), Pass: c.pass[arm](i), WallSeconds: wall})
		}
	}
	rule := analysis.Rule{Clauses: append(c.clause,
		analysis.Clause{If: []analysis.Condition{{Outcomes: []analysis.Outcome{analysis.Improvement}, Candidate: "cand", Baseline: "base"}}, Then: "accept cand"})}
	d := analysis.Design{Hash: "d1", Arms: []analysis.Arm{{Name: "base"}, {Name: "cand"}, {Name: "alt"}}, Incumbent: "base",
		Pairs:    []analysis.Pair{{Candidate: "cand", Baseline: "base"}, {Candidate: "alt", Baseline: "base"}},
		JobKinds: []analysis.JobKind{{Name: "apply", Measure: analysis.MeasurePass}}, Seed: 1, Rule: rule, Power: c.power, Guardrails: c.guard}
	in := analysis.Input{Design: d, Trials: trials}
	if c.stop != nil {
		in = c.stopped(t, in)
	}
	rep, err := analysis.Analyse(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return in, rep
}

// stopped runs the stopping rule's monitor as the runner does, a check per
// block of 8 tasks, and returns the input as the study left it: the trials
// run until every pair settled, and its early-stopping record.
func (c reviewerCase) stopped(t *testing.T, in analysis.Input) analysis.Input {
	t.Helper()
	const block = 8
	for n := block; n <= c.tasks; n += block {
		var pairs []analysis.MonitoredPair
		for _, p := range in.Design.Pairs {
			mp := analysis.MonitoredPair{Pair: p, JobKind: "apply", Measure: analysis.MeasurePass, Planned: c.tasks}
			for i := range n {
				mp.Tasks = append(mp.Tasks, analysis.PairedTask{Task: fmt.Sprintf("t%03d", i), Candidate: b2f(c.pass[p.Candidate](i)), Baseline: b2f(c.pass[p.Baseline](i))})
			}
			for k := block; k <= n; k += block {
				mp.Checks = append(mp.Checks, k)
			}
			pairs = append(pairs, mp)
		}
		look, err := analysis.Monitor(analysis.MonitorState{Stopping: *c.stop, Pairs: pairs})
		if err != nil {
			t.Fatal(err)
		}
		if !look.Stop {
			continue
		}
		seq := &analysis.Sequential{Stopping: *c.stop, Look: look, StoppedEarly: true}
		var run []analysis.Trial
		for _, tr := range in.Trials {
			if tr.Task < fmt.Sprintf("t%03d", n) {
				run = append(run, tr)
			} else {
				seq.NotRun = append(seq.NotRun, tr.Arm+"|apply|"+tr.Task+"#1")
			}
		}
		return analysis.Input{Design: in.Design, Trials: run, Sequential: seq}
	}
	t.Fatalf("the study never stopped early (%d tasks, a check per %d)", c.tasks, block)
	return in
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// renderings are one report as a reviewer reads it in three places.
type renderings struct{ markdown, page, cli string }

func render(t *testing.T, in analysis.Input, rep *analysis.Report, stated float64) (report.Data, renderings) {
	t.Helper()
	sd := &studies.Design{}
	sd.Power.SmallestDetectableDifference = stated
	data := ReportData(&Evidence{Study: "reviewed", Design: sd, Snapshot: &studies.Snapshot{DesignHash: "d1"}}, in, rep, Extras{})
	var md, page, cli bytes.Buffer
	if err := report.WriteMarkdown(&md, data); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteHTML(&page, data); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteSummary(&cli); err != nil {
		t.Fatal(err)
	}
	tags := regexp.MustCompile(`<[^>]+>`)
	// The page read as text: tags out, entities decoded, a table row a line.
	text := strings.NewReplacer("</tr>", "</tr>\n", "</p>", "</p>\n").Replace(page.String())
	return data, renderings{markdown: strings.ReplaceAll(md.String(), `\|`, "|"), page: html.UnescapeString(tags.ReplaceAllString(text, " ")), cli: cli.String()}
}

// lineWith is the first line of text that holds every one of keys.
func lineWith(text string, keys ...string) string {
	for _, l := range strings.Split(text, "\n") {
		all := true
		for _, k := range keys {
			all = all && strings.Contains(l, k)
		}
		if all {
			return l
		}
	}
	return ""
}

// TestReportReadsLikeAReviewer renders studies of each kind of outcome —
// a difference crossed, one not crossed, a tie, no signal, a rule that is
// underpowered — as the Markdown, the page and the CLI's summary, and reads
// every figure and claim about each pair and arm in all three: each must be
// the analysis value it names, in the same words and the same rounding. A
// place that words a pair or rounds a figure differently from another
// fails.
func TestReportReadsLikeAReviewer(t *testing.T) {
	even := func(i int) bool { return i%2 == 0 }
	tenth := 0.1
	none := func(int) bool { return false }
	cases := []reviewerCase{
		{name: "crossed", tasks: 40, pass: map[string]func(int) bool{"base": even, "cand": func(i int) bool { return i%2 == 0 || i%5 != 0 }, "alt": even}},
		{name: "not crossed", tasks: 40, pass: map[string]func(int) bool{"base": even, "cand": func(i int) bool { return even(i) || i == 3 || i == 7 }, "alt": func(i int) bool { return even(i) && i != 4 }}},
		{name: "tie", tasks: 30, pass: map[string]func(int) bool{"base": even, "cand": even, "alt": even}},
		{name: "no signal", tasks: 30, pass: map[string]func(int) bool{"base": none, "cand": none, "alt": none}},
		{name: "guardrail holds (faster)", tasks: 40, pass: map[string]func(int) bool{"base": even, "cand": func(i int) bool { return i%2 == 0 || i%5 != 0 }, "alt": even},
			slow: map[string]float64{"cand": 0.8}, guard: []analysis.Guardrail{{Metric: analysis.MetricWallTime, MaxRelative: &tenth}}},
		{name: "guardrail breached (slower)", tasks: 40, pass: map[string]func(int) bool{"base": even, "cand": func(i int) bool { return i%2 == 0 || i%5 != 0 }, "alt": even},
			slow: map[string]float64{"cand": 1.5}, guard: []analysis.Guardrail{{Metric: analysis.MetricWallTime, MaxRelative: &tenth}}, blocks: true},
		{name: "stopped early, crossed", tasks: 48, pass: map[string]func(int) bool{"base": none, "cand": func(int) bool { return true }, "alt": func(int) bool { return true }},
			stop: &analysis.Stopping{Method: analysis.GroupSequential, Spending: analysis.Pocock, Alpha: 0.05}},
		{name: "stopped early, futile", tasks: 48, pass: map[string]func(int) bool{"base": even, "cand": even, "alt": even},
			stop: &analysis.Stopping{Method: analysis.GroupSequential, Spending: analysis.Pocock, Alpha: 0.05, Futility: 0.35, Discordance: 0.5}},
		{name: "underpowered", tasks: 27, pass: map[string]func(int) bool{"base": even, "cand": func(i int) bool { return even(i) || i == 1 }, "alt": even},
			power:  &analysis.PowerPlan{PilotDiscordance: 0.3, Tasks: 27, SmallestDifference: 0.4},
			clause: []analysis.Clause{{Check: analysis.CheckUnderpowered, Then: analysis.NoDecision}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, rep := c.analyse(t)
			var stated float64
			if c.power != nil {
				stated = c.power.SmallestDifference
			}
			data, r := render(t, in, rep, stated)
			places := map[string]string{"markdown": r.markdown, "page": r.page, "cli": r.cli}
			for _, p := range rep.Pairs {
				name := p.Candidate + " vs " + p.Baseline
				claims := []string{
					wording.SignedInterval(float64(p.Delta), float64(p.Interval.Lo), float64(p.Interval.Hi)),
					wording.P(float64(p.PHolm)),
					wording.Outcome(string(p.Outcome)),
					p.Reading(stated, rep.Alpha),
				}
				for place, text := range places {
					row := lineWith(text, name, claims[0])
					if row == "" {
						t.Errorf("%s: no line shows pair %s with its Δ [interval] %s", place, name, claims[0])
						continue
					}
					for _, claim := range claims[1:] {
						if !strings.Contains(row, claim) {
							t.Errorf("%s: pair %s reads %q; want it to say %q (the analysis value)", place, name, row, claim)
						}
					}
				}
			}
			for _, k := range rep.Kinds {
				for _, a := range k.Arms {
					claims := []string{
						wording.Interval(float64(a.Mean), float64(a.Interval.Lo), float64(a.Interval.Hi)),
						wording.Percent(float64(a.PassRate)),
						wording.PBest(float64(a.PBest)),
					}
					for place, text := range places {
						row := lineWith(text, claims[0])
						if row == "" {
							t.Errorf("%s: arm %s's %s [interval] %q is not printed", place, a.Arm, k.Measure, claims[0])
							continue
						}
						for _, claim := range claims[1:] {
							if !strings.Contains(row, claim) {
								t.Errorf("%s: arm %s reads %q; want %q", place, a.Arm, row, claim)
							}
						}
					}
				}
				if k.Leader != "" {
					for place, text := range places {
						if !strings.Contains(text, k.Leader) || !strings.Contains(text, "P(best) "+wording.PBest(float64(k.LeaderPBest))) {
							t.Errorf("%s: the leader %s with P(best) %s is not said", place, k.Leader, wording.PBest(float64(k.LeaderPBest)))
						}
					}
				}
				if k.Verdict == analysis.NoSignal {
					for place, text := range places {
						if !strings.Contains(strings.ToLower(text), "no signal") {
							t.Errorf("%s: a study with no signal is not read as no signal", place)
						}
					}
					// The kind says "no signal, not a tie": none of its
					// pairs may then be called a tie.
					for _, p := range rep.Pairs {
						if p.JobKind == k.JobKind && p.Outcome == analysis.Tie {
							t.Errorf("pair %s vs %s is a tie in a job kind read as no signal, not a tie", p.Candidate, p.Baseline)
						}
					}
				}
			}
			// Each guardrail's reading, limit and verdict on one line of
			// the page and of the Markdown, in the words of its direction.
			for _, gc := range rep.Constraints {
				verdict := "holds"
				if gc.Blocks {
					verdict = "blocks"
				}
				for _, place := range []string{"markdown", "page"} {
					if lineWith(places[place], gc.Reading, gc.Limit, verdict) == "" {
						t.Errorf("%s: no line reads guardrail %s as %q, limit %s, %s", place, gc.Clause, gc.Reading, gc.Limit, verdict)
					}
				}
				faster := float64(gc.CandidateValue) < float64(gc.BaselineValue)
				if faster && (strings.Contains(gc.Reading, "slower") || strings.Contains(gc.Reading, "worse")) ||
					!faster && strings.Contains(gc.Reading, "faster") {
					t.Errorf("guardrail %s reads %q for %v s against %v s", gc.Clause, gc.Reading, gc.CandidateValue, gc.BaselineValue)
				}
			}
			if len(c.guard) > 0 {
				blocked := slices.ContainsFunc(rep.Constraints, func(gc analysis.Constraint) bool { return gc.Blocks })
				if len(rep.Constraints) == 0 || blocked != c.blocks {
					t.Errorf("guardrails judged %+v; want one that blocks: %v", rep.Constraints, c.blocks)
				}
			}
			if c.stop != nil {
				var stopLine string
				for _, l := range rep.Decision.Trace {
					if strings.HasPrefix(l, "stopped early") {
						stopLine = l
					}
				}
				if stopLine == "" {
					t.Errorf("the trace does not say the study stopped early: %q", rep.Decision.Trace)
				}
				for place, text := range places {
					if !strings.Contains(text, stopLine) {
						t.Errorf("%s: the trace's stop line %q is not printed", place, stopLine)
					}
				}
				// The early-stopping table reads alike on the page and in
				// the Markdown: each monitored pair's status, sequential
				// and Holm p and interval, as report.json holds them.
				if data.Stop == nil || len(data.Stop.Pairs) == 0 {
					t.Fatal("a study that stopped early has no early-stopping table")
				}
				for _, sp := range data.Stop.Pairs {
					name, of := sp.Challenger+" vs "+sp.Baseline, fmt.Sprintf("%d of %d", sp.Tasks, sp.Planned)
					for _, place := range []string{"markdown", "page"} {
						row := lineWith(places[place], name, of)
						for _, claim := range []string{sp.Status, wording.P(sp.P), wording.P(sp.PHolm), sp.IntervalText()} {
							if !strings.Contains(row, claim) {
								t.Errorf("%s: monitored pair %s reads %q; want %q", place, name, row, claim)
							}
						}
					}
				}
			}
			for place, text := range places {
				if !strings.Contains(text, rep.Decision.Action) {
					t.Errorf("%s: the decision %q is not said", place, rep.Decision.Action)
				}
			}
			if rep.Power != nil && rep.Power.MinDetectable.Valid() {
				computed := "±" + wording.Value(float64(rep.Power.MinDetectable))
				for _, place := range []string{"markdown", "page"} {
					l := lineWith(places[place], computed)
					if !strings.Contains(l, "computed by rig") || !strings.Contains(l, "stated by the design: ±"+wording.Value(stated)) {
						t.Errorf("%s: the detectable difference is not shown as stated and computed side by side: %q", place, l)
					}
				}
				trace := strings.Join(rep.Decision.Trace, "\n")
				if want := fmt.Sprintf("%.1f points", 100*float64(rep.Power.MinDetectable)); strings.Contains(trace, "can only detect") && !strings.Contains(trace, want) {
					t.Errorf("the trace's detectable difference differs from the computed %s:\n%s", want, trace)
				}
			}
			if t.Failed() {
				t.Logf("markdown:\n%s\ncli:\n%s", r.markdown, r.cli)
			}
		})
	}
}

package main

import (
	"strings"
	"testing"

	"rig/internal/wording"
	"rig/report"
)

// checkReportReadsAlike reads a real run's report as a reviewer does: every
// named pair's difference, interval, Holm p, outcome and reading, and every
// arm's estimate, pass rate and P(best), as report.json holds them, must be
// printed the same way on the pair's (arm's) row of report.md and on its
// line of the CLI's summary. The unit test of every kind of outcome is
// report/findings.TestReportReadsLikeAReviewer; this holds a study that ran
// on the real runtimes to it.
func checkReportReadsAlike(t *testing.T, data report.Data, markdown, cli string) {
	t.Helper()
	markdown = strings.ReplaceAll(markdown, `\|`, "|")
	places := map[string]string{"report.md": markdown, "the CLI summary": cli}
	for _, k := range data.Kinds {
		for _, p := range k.Pairs {
			name := p.Challenger + " vs " + p.Baseline
			delta := wording.SignedInterval(p.Delta.Value, p.Delta.Low, p.Delta.High)
			for place, text := range places {
				row := lineHolding(text, name, delta)
				if row == "" {
					t.Errorf("%s: no line shows pair %s with its Δ [interval] %s (report.json)", place, name, delta)
					continue
				}
				for _, claim := range []string{wording.P(p.PHolm), wording.Outcome(p.Outcome), p.Reading} {
					if !strings.Contains(row, claim) {
						t.Errorf("%s: pair %s reads %q; report.json says %q", place, name, row, claim)
					}
				}
			}
		}
		for _, a := range k.Arms {
			estimate := wording.Interval(a.Score.Value, a.Score.Low, a.Score.High)
			for place, text := range places {
				row := lineHolding(text, a.Arm, estimate)
				if row == "" {
					t.Errorf("%s: no line shows arm %s with its estimate %s (report.json)", place, a.Arm, estimate)
					continue
				}
				for _, claim := range []string{wording.Percent(a.PassRate), wording.PBest(a.PBest)} {
					if !strings.Contains(row, claim) {
						t.Errorf("%s: arm %s reads %q; report.json says %q", place, a.Arm, row, claim)
					}
				}
			}
		}
	}
}

// lineHolding is the first line of text that holds every one of keys.
func lineHolding(text string, keys ...string) string {
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

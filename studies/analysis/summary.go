package analysis

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteSummary prints the report as plain text for a terminal: the ranking,
// the named pairs, the decision with its trace, and the warnings. The
// HTML/Markdown report is rendered elsewhere from the same Report.
func (r *Report) WriteSummary(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("design %s  comparison %s\n", short(r.DesignHash), short(r.ComparisonHash))
	p("intervals: %s %.0f%%, %d resamples, seed %d; Holm across %d tests at alpha %.3g\n", r.IntervalMethod, 100*r.Level, r.Resamples, r.Seed, r.HolmFamily, r.Alpha)
	for _, k := range r.Kinds {
		p("\n%s (%s, gate %.2f, %d tasks, %d common)\n", k.JobKind, k.Measure, k.Gate, k.Tasks, k.CommonTasks)
		p("arm\ttasks\tmean\tinterval\tpass\tmedian\tp10\tworst\tP(best)\tcapped\n")
		for _, a := range k.Arms {
			p("%s\t%d\t%s\t[%s, %s]\t%s\t%s\t%s\t%s\t%s\t%d\n", a.Arm, a.Tasks, f3(a.Mean), f3(a.Interval.Lo), f3(a.Interval.Hi), f3(a.PassRate), f3(a.Median), f3(a.P10), f3(a.Worst), f3(a.PBest), a.Counts.Capped)
		}
		switch k.Verdict {
		case "best":
			p("best: %s (P(best) %s)\n", k.Leader, f3(k.LeaderPBest))
		case "tie":
			p("tie: leader %s has P(best) %s, below the bar; tied: %s\n", k.Leader, f3(k.LeaderPBest), strings.Join(k.TiedWith, ", "))
		default:
			p("%s\n", k.Verdict)
		}
	}
	if len(r.Pairs) > 0 {
		p("\npair\tkind\ttasks\tmissing pairs\tdelta\tinterval\tp\tHolm p\toutcome\n")
		for _, pr := range r.Pairs {
			p("%s vs %s\t%s\t%d\t%d\t%s\t[%s, %s]\t%s\t%s\t%s (%s)\n", pr.Candidate, pr.Baseline, pr.JobKind, pr.Tasks, pr.MissingTasks, f3(pr.Delta), f3(pr.Interval.Lo), f3(pr.Interval.Hi), fp(pr.P), fp(pr.PHolm), pr.Outcome, pr.Shown)
		}
	}
	p("\ndecision: %s (next baseline: %s)\n", r.Decision.Action, orNone(r.Decision.NextBaseline))
	for _, line := range r.Decision.Trace {
		p("  %s\n", line)
	}
	for _, wn := range r.Warnings {
		p("warning: %s\n", wn)
	}
	return tw.Flush()
}

func f3(n Num) string {
	if !n.Valid() {
		return "—"
	}
	return fmt.Sprintf("%.3f", float64(n))
}

func fp(n Num) string {
	if !n.Valid() {
		return "—"
	}
	return fmt.Sprintf("%.3g", float64(n))
}

package analysis

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"rig/internal/wording"
)

// WriteSummary prints the report as plain text for a terminal: the ranking,
// the named pairs, the decision with its trace, and the warnings. The
// HTML/Markdown report is rendered elsewhere from the same Report.
func (r *Report) WriteSummary(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("design %s  comparison %s\n", short(r.DesignHash), short(r.ComparisonHash))
	p("intervals %s (method beside each); bootstrap %s, %d resamples, seed %d; Holm across %d tests at alpha %.3g\n", LevelPercent(r.Level), r.IntervalMethod, r.Resamples, r.Seed, r.HolmFamily, r.Alpha)
	for _, k := range r.Kinds {
		p("\n%s (%s, gate %.2f, %d tasks, %d common)\n", k.JobKind, k.Measure, k.Gate, k.Tasks, k.CommonTasks)
		if k.RankBy == MetricFidelityKL {
			p("pairs ranked by mean KL per token to the reference (lower is better; closeness to the reference model, not correctness); the arms below are their pass rates, shown beside\n")
		}
		p("arm\ttasks\tmean [interval]\tpass\tmedian\tp10\tworst\tP(best)\tcapped\n")
		for _, a := range k.Arms {
			p("%s\t%d\t%s %s\t%s\t%s\t%s\t%s\t%s\t%d\n", a.Arm, a.Tasks, wording.Interval(float64(a.Mean), float64(a.Interval.Lo), float64(a.Interval.Hi)), a.Interval.Method, wording.Percent(float64(a.PassRate)), f3(a.Median), f3(a.P10), f3(a.Worst), wording.PBest(float64(a.PBest)), a.Counts.Capped)
		}
		switch {
		case k.Verdict == "best":
			p("best: %s (P(best) %s)\n", k.Leader, wording.PBest(float64(k.LeaderPBest)))
		case k.Verdict == NoSignal:
			p("no signal: every arm scored the same on every task; no leader, not a tie\n")
		case k.Verdict == "tie" && k.Leader == "":
			p("tie: no leader, the top is shared exactly (P(best) %s); tied: %s\n", wording.PBest(float64(k.LeaderPBest)), strings.Join(k.TiedWith, ", "))
		case k.Verdict == "tie":
			p("tie: leader %s has P(best) %s, below the bar; tied: %s\n", k.Leader, wording.PBest(float64(k.LeaderPBest)), strings.Join(k.TiedWith, ", "))
		default:
			p("%s\n", k.Verdict)
		}
	}
	if len(r.Pairs) > 0 {
		var detectable float64
		if r.Power != nil {
			detectable = r.Power.SmallestDifference
		}
		p("\npair\tkind\ttasks\tmissing pairs\tΔ [interval]\tp\tHolm p\toutcome (reading)\n")
		for _, pr := range r.Pairs {
			p("%s vs %s\t%s\t%d\t%d\t%s %s\t%s\t%s\t%s (%s)\n", pr.Candidate, pr.Baseline, pr.JobKind, pr.Tasks, pr.MissingTasks,
				wording.SignedInterval(float64(pr.Delta), float64(pr.Interval.Lo), float64(pr.Interval.Hi)), pr.Interval.Method,
				wording.P(float64(pr.P)), wording.P(float64(pr.PHolm)), wording.Outcome(string(pr.Outcome)), pr.Reading(detectable, r.Alpha))
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

func f3(n Num) string { return wording.Value(float64(n)) }

// IntervalText says in words how a job kind's intervals were made: the
// level, each method its arms and pairs used with what it is, any note a
// fallback left, and where P(best) came from. The report prints it beside
// the job kind; the method's name is printed beside each interval.
func (r *Report) IntervalText(k KindResult) string {
	var methods []IntervalMethod
	var notes []string
	see := func(who string, iv Interval) {
		if iv.Method != "" && !slices.Contains(methods, iv.Method) {
			methods = append(methods, iv.Method)
		}
		if iv.Note != "" {
			notes = append(notes, who+": "+iv.Note)
		}
		if iv.EffectiveN > 0 {
			notes = append(notes, fmt.Sprintf("%s: %.1f effective tasks", who, iv.EffectiveN))
		}
	}
	for _, a := range k.Arms {
		see(a.Arm, a.Interval)
	}
	for _, pr := range r.Pairs {
		if pr.JobKind == k.JobKind {
			see(pr.Candidate+" vs "+pr.Baseline, pr.Interval)
		}
	}
	parts := []string{LevelPercent(r.Level)}
	for _, m := range methods {
		parts = append(parts, string(m)+": "+m.Describe())
	}
	parts = append(parts, notes...)
	parts = append(parts, fmt.Sprintf("P(best) from %d bootstrap resamples of tasks, seed %d", r.Resamples, r.Seed))
	return strings.Join(parts, "; ")
}

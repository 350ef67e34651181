package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"rig/internal/wording"
)

// Missing is what every renderer prints for a value that was not measured.
const Missing = wording.Missing

func num(v float64) string { return wording.Value(v) }

func pct(v float64) string { return wording.Percent(v) }

// interval prints an estimate, its interval and, beside it, the method.
func interval(iv Interval) string {
	return wording.Interval(iv.Value, iv.Low, iv.High) + methodSuffix(iv)
}

func deltaText(iv Interval) string {
	return wording.SignedInterval(iv.Value, iv.Low, iv.High) + methodSuffix(iv)
}

func methodSuffix(iv Interval) string {
	if iv.Method == "" {
		return ""
	}
	return " " + iv.Method
}

// pval prints small p-values in scientific notation so that 3e-7 does not
// read as zero.
func pval(p float64) string { return wording.P(p) }

func optNum(v *float64, format string) string {
	if v == nil {
		return Missing
	}
	return fmt.Sprintf(format, *v)
}

func bytesText(b *int64) string {
	if b == nil {
		return Missing
	}
	v := float64(*b)
	switch {
	case v >= 1<<30:
		return fmt.Sprintf("%.2f GiB", v/(1<<30))
	case v >= 1<<20:
		return fmt.Sprintf("%.0f MiB", v/(1<<20))
	default:
		return fmt.Sprintf("%.0f KiB", v/(1<<10))
	}
}

func secondsText(s *float64) string {
	if s == nil {
		return Missing
	}
	v := *s
	switch {
	case v >= 3600:
		return fmt.Sprintf("%dh %02dm", int(v/3600), int(math.Mod(v, 3600)/60))
	case v >= 60:
		return fmt.Sprintf("%dm %02ds", int(v/60), int(math.Mod(v, 60)))
	default:
		return fmt.Sprintf("%.1f s", v)
	}
}

// energyText labels an estimate as one, so it is never read as a
// measurement.
func energyText(j *float64, source string) string {
	if j == nil {
		return Missing
	}
	var v string
	switch {
	case *j >= 3.6e6:
		v = fmt.Sprintf("%.2f kWh", *j/3.6e6)
	case *j >= 1000:
		v = fmt.Sprintf("%.1f kJ", *j/1000)
	default:
		v = fmt.Sprintf("%.0f J", *j)
	}
	switch source {
	case "":
		return v
	case "estimate":
		return "≈ " + v + " (estimate)"
	default:
		return v + " (" + source + ")"
	}
}

func short(digest string) string {
	d := digest
	if i := strings.IndexByte(d, ':'); i >= 0 && i < 12 {
		d = d[i+1:]
	}
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// slug makes a name usable in an element id.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.TrimSuffix(b.String(), "-")
	if out == "" {
		return "x"
	}
	return out
}

// MissingText is a pair's missing pairs as the tables print them: "0", or
// the count with the tasks, e.g. "2: t07 (lacks gemma), t09 (lacks both)".
func MissingText(p Pair) string {
	if p.Missing == 0 {
		return "0"
	}
	if len(p.MissingTasks) == 0 {
		return fmt.Sprint(p.Missing)
	}
	return fmt.Sprintf("%d: %s", p.Missing, strings.Join(p.MissingTasks, ", "))
}

// msText is a latency in milliseconds, shown in seconds past a second.
func msText(ms *float64) string {
	if ms == nil {
		return Missing
	}
	if *ms >= 1000 {
		return fmt.Sprintf("%.2f s", *ms/1000)
	}
	return fmt.Sprintf("%.0f ms", *ms)
}

// deltaMSText is a signed latency difference; the baseline's own row has none.
func deltaMSText(ms *float64) string {
	if ms == nil {
		return Missing
	}
	if math.Abs(*ms) >= 1000 {
		return fmt.Sprintf("%+.2f s", *ms/1000)
	}
	return fmt.Sprintf("%+.0f ms", *ms)
}

// Verdict is "blocks" or "holds".
func (c Constraint) Verdict() string {
	if c.Blocks {
		return "blocks"
	}
	return "holds"
}

// Text is the check in one sentence: counts, statistic, p-value, threshold.
func (s SRM) Text() string {
	var parts []string
	for i, a := range s.Arms {
		if i < len(s.Planned) && i < len(s.Scored) {
			parts = append(parts, fmt.Sprintf("%s %d of %d", a, s.Scored[i], s.Planned[i]))
		}
	}
	stat := Missing
	if s.ChiSq != nil && s.P != nil {
		stat = fmt.Sprintf("chi-square %.3g on %d df, p = %.3g", *s.ChiSq, s.DF, *s.P)
	}
	verdict := "no sample-ratio mismatch"
	if s.Mismatch {
		verdict = "SAMPLE-RATIO MISMATCH: an arm lost more trials than chance explains; read its failures before its numbers"
	}
	return fmt.Sprintf("Scored trials of planned: %s; %s (flagged under p = %g): %s.", strings.Join(parts, ", "), stat, s.Alpha, verdict)
}

// noLeader is the headline of a job kind in which no arm ranks first, ""
// when one does: nothing was measured (no signal), the top is shared
// exactly, or no task has a result for every arm.
func noLeader(k Kind) string {
	if k.Leader != "" {
		return ""
	}
	switch k.Verdict {
	case "no signal":
		return "No signal. Every arm scored the same on every task, so nothing here tells the arms apart: no arm leads, and this is not a tie. Read the warnings and the sampled outputs before any number."
	case "tie":
		var tied []string
		top := 0.0
		for _, a := range k.Arms {
			if a.Tie {
				tied = append(tied, a.Arm)
			}
			top = math.Max(top, a.PBest)
		}
		return fmt.Sprintf("No single best arm. The top of the ranking is shared exactly (%s, P(best) %.2f each): a tie, and no arm leads.", strings.Join(tied, ", "), top)
	case "no common tasks":
		return "No arm ranks: no task has a result for every arm."
	}
	return ""
}

// leaderText is the headline of a job kind whose leader is a, in words. A
// job kind ranked by fidelity says that P(best) is the pass rate's, so the
// headline cannot be read against the pairs, which rank by mean KL.
func leaderText(k Kind, a Arm) string {
	if k.RankedBy != "" {
		return "By pass rate (the pairs and the decision rank by " + k.RankedBy + "): " + leaderByPassRate(k, a)
	}
	return leaderByPassRate(k, a)
}

// leaderByPassRate is leaderText's sentence on the arms' P(best).
func leaderByPassRate(k Kind, a Arm) string {
	switch {
	case a.Tie:
		return fmt.Sprintf("No single best arm. %s leads with P(best) %.2f, below the bar of %.2f: a tie.", a.Arm, a.PBest, k.BestBar)
	case a.PBest >= k.BestBar:
		return fmt.Sprintf("%s ranks first with P(best) %.2f, at or above the bar of %.2f.", a.Arm, a.PBest, k.BestBar)
	}
	return fmt.Sprintf("%s ranks first with P(best) %.2f.", a.Arm, a.PBest)
}

// detectableText words the smallest detectable difference of a job kind:
// what the design states, and beside it what rig computes for the planned
// task count, each labelled as such. The two differ (the design rounds, rig
// computes the exact power), and a reader must tell which one a number is.
func detectableText(k Kind) string {
	stated := "the design states no smallest detectable difference"
	if k.Detectable != nil {
		stated = fmt.Sprintf("smallest detectable difference stated by the design: ±%s at 80%% power", num(*k.Detectable))
	}
	power := strconv.FormatFloat(100*k.DetectablePower, 'f', -1, 64)
	switch {
	case k.DetectablePilot == 0:
		return stated + " (rig computes none: the design gives no pilot discordance)"
	case k.DetectableComputed == nil:
		return fmt.Sprintf("%s; computed by rig: none, %d tasks cannot detect any lead at %s%% power with the pilot's discordance of %s", stated, k.DetectableTasks, power, num(k.DetectablePilot))
	}
	return fmt.Sprintf("%s; computed by rig: ±%s for %d tasks at %s%% power", stated, num(*k.DetectableComputed), k.DetectableTasks, power)
}

// computedAside is the computed detectable difference as an aside to a
// sentence about the stated one; empty when rig computed none.
func computedAside(k Kind) string {
	switch {
	case k.DetectablePilot == 0:
		return ""
	case k.DetectableComputed == nil:
		return fmt.Sprintf(" (computed by rig: %d tasks cannot detect any lead)", k.DetectableTasks)
	}
	return fmt.Sprintf(" (computed by rig: ±%s for %d tasks)", num(*k.DetectableComputed), k.DetectableTasks)
}

// readingOf is a pair's reading as every renderer prints it. Data written
// before pairs carried their reading (Reading empty) is read as it was then:
// NotShown, else by the Holm-adjusted p against the job kind's level.
func readingOf(k Kind, pr Pair) string {
	switch {
	case pr.Reading != "":
		return pr.Reading
	case pr.NotShown != "":
		return pr.NotShown
	case pr.PHolm < k.Alpha:
		return wording.Shown(k.Alpha)
	}
	return wording.NotShown(k.Alpha)
}

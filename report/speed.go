package report

import (
	"fmt"
	"math"
)

// D is the card's changes against the baseline, empty for the baseline's
// own row, so that a template reads .D.GenTokS without a nil check.
func (s Speed) D() SpeedDelta {
	if s.Delta == nil {
		return SpeedDelta{}
	}
	return *s.Delta
}

// perTokenText is a time per token or to first token: milliseconds with
// the decimals a per-token time needs, seconds past one.
func perTokenText(ms *float64) string {
	switch {
	case ms == nil:
		return Missing
	case *ms >= 1000:
		return fmt.Sprintf("%.2f s", *ms/1000)
	case *ms >= 100:
		return fmt.Sprintf("%.0f ms", *ms)
	default:
		return fmt.Sprintf("%.1f ms", *ms)
	}
}

// relText is a relative change against the baseline, "+12%"; empty when
// there is none to show (the baseline's own row, or an unmeasured side).
func relText(d *float64) string {
	if d == nil || math.IsNaN(*d) {
		return ""
	}
	return fmt.Sprintf("%+.0f%%", 100**d)
}

// withRel is a figure followed by its change against the baseline.
func withRel(v string, d *float64) string {
	if r := relText(d); r != "" {
		return v + " (" + r + ")"
	}
	return v
}

// speedMarkdown writes a job kind's speed card: one row per arm.
func speedMarkdown(k Kind, p func(string, ...any), head func(...string), row func(...string)) {
	if len(k.Speed) == 0 {
		return
	}
	p("### Speed per arm\n\n")
	p("The runtime's own timings over the scored trials (tokens per second: medians of the per-trial rates; TTFT: its prompt time, first token out; TPOT: generation time per output token), each trial's own request under the arm's load. Beside them the load: the arm's slots (trials in flight at once), its throughput over the time its runtime served it (trials/s and output tok/s, every slot together) and the median wall time of one trial's request; then wall time, peak memory and energy charged per trial. In brackets: the change against the baseline.\n\n")
	head("arm", "runtime", "slots", "timed trials", "prompt tok/s", "gen tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "request wall p50", "trials/s", "out tok/s (all slots)", "wall time", "peak memory", "energy")
	var notes []string
	for _, s := range k.Speed {
		name, d := s.Arm, s.D()
		if s.Baseline {
			name += " (baseline)"
		}
		row(name, s.Runtime, slotsText(s.Slots), fmt.Sprint(s.Timed),
			withRel(optNum(s.PromptTokS, "%.1f"), d.PromptTokS), withRel(optNum(s.GenTokS, "%.1f"), d.GenTokS),
			withRel(perTokenText(s.TTFTP50MS), d.TTFTP50), withRel(perTokenText(s.TTFTP99MS), d.TTFTP99),
			withRel(perTokenText(s.TPOTP50MS), d.TPOTP50), withRel(perTokenText(s.TPOTP99MS), d.TPOTP99),
			secondsText(s.WallP50Seconds), optNum(s.TrialsPerS, "%.3f"), withRel(optNum(s.OutputTokS, "%.1f"), d.OutputTokS),
			withRel(secondsText(s.WallSeconds), d.Wall), withRel(bytesText(s.PeakMemBytes), d.PeakMem),
			withRel(energyText(s.EnergyJoules, s.EnergySource), d.Energy))
		if s.LoadNote != "" {
			notes = append(notes, s.Arm+": "+s.LoadNote+".")
		}
	}
	for _, n := range notes {
		p("\n%s\n", n)
	}
	p("\n")
}

// slotsText is an arm's slot count; a card read from an analysis that
// predates slots ran one at a time.
func slotsText(n int) string { return fmt.Sprint(max(n, 1)) }

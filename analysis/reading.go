package analysis

import "rig/internal/wording"

// NotShownText is the wording for a delta smaller than the study can
// detect: it says "not shown", never "equal".
func NotShownText(delta, detectable float64) string {
	return wording.BelowDetectable(delta, detectable)
}

// Reading words whether the pair's difference was shown at the family-wise
// level alpha after Holm, or, for a pair not shown, NotShownText given the
// smallest difference the design says its task count detects (detectable; 0
// when none is stated, then plainly "no difference shown"). The report page,
// its Markdown and the CLI summary all print this, so that they never read
// one pair differently (issue 46: the CLI said "tie (no signal)" where the
// page said "not shown"). Why nothing was shown — no signal, no difference
// in any task — is the pair's Reason and the job kind's verdict, not a
// second word for the same reading.
func (p PairResult) Reading(detectable, alpha float64) string {
	switch {
	case p.byFidelity && p.Shown == "shown":
		// Judged on its fidelity interval, not on a Holm-adjusted test,
		// and in nats, not in the pass points detectable is stated in.
		return "shown: the mean-KL interval excludes 0"
	case p.byFidelity:
		return "no difference in mean KL shown: the interval spans 0 or was not measured"
	case p.Shown == "shown":
		return wording.Shown(alpha)
	case detectable > 0:
		return NotShownText(float64(p.Delta), detectable)
	}
	return wording.NotShown(alpha)
}

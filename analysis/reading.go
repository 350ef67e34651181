package analysis

import (
	"fmt"
	"math"
)

// NotShownText is the wording for a delta smaller than the study can
// detect: it says "not shown", never "equal".
func NotShownText(delta, detectable float64) string {
	return fmt.Sprintf("not shown: |Δ| %.3f is below the %.3f this task count can detect at 80%% power", math.Abs(delta), detectable)
}

// Reading words whether the pair's difference was shown: "shown", or, for
// a pair not shown, NotShownText given the smallest difference the design
// says its task count detects (detectable; 0 when none is stated, then
// plainly "not shown"). The report page and the CLI summary both print
// this, so the two never read one pair differently (issue 46: the CLI said
// "tie (no signal)" where the page said "not shown"). Why nothing was
// shown — no signal, no difference in any task — is the pair's Reason and
// the job kind's verdict, not a second word for the same reading.
func (p PairResult) Reading(detectable float64) string {
	switch {
	case p.Shown == "shown":
		return "shown"
	case detectable > 0:
		return NotShownText(float64(p.Delta), detectable)
	}
	return "not shown"
}

// Package wording is how rig words a study's figures wherever it prints
// them: the CLI's summary (analysis), the report page and its Markdown
// (report). One figure reads the same in each — the same rounding, the same
// sign, the same words for a pair's reading and outcome — because each
// renderer calls these and no other formatter for them.
//
// It is not for logs, errors or the audit log, and it holds no statistics:
// what a figure is comes from analysis; this package only says it.
package wording

import (
	"fmt"
	"math"
	"strings"
)

// Missing is printed for a value that was not measured or cannot be
// computed (NaN, ±Inf).
const Missing = "—"

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Value is an estimate or a bound: three decimals.
func Value(v float64) string {
	if !finite(v) {
		return Missing
	}
	return fmt.Sprintf("%.3f", v)
}

// Signed is a difference or a bound of one: three decimals with its sign,
// so that +0.000 and -0.000 read as the sides they are.
func Signed(v float64) string {
	if !finite(v) {
		return Missing
	}
	return fmt.Sprintf("%+.3f", v)
}

// Interval is an estimate with its bounds, "0.400 [0.250, 0.560]".
func Interval(v, lo, hi float64) string {
	return fmt.Sprintf("%s [%s, %s]", Value(v), Value(lo), Value(hi))
}

// SignedInterval is a difference with its bounds, "+0.100 [-0.050, +0.250]".
func SignedInterval(v, lo, hi float64) string {
	return fmt.Sprintf("%s [%s, %s]", Signed(v), Signed(lo), Signed(hi))
}

// P is a p-value: three decimals, and small ones in scientific notation so
// that 3e-7 does not read as zero.
func P(p float64) string {
	switch {
	case !finite(p):
		return Missing
	case p >= 0.001:
		return fmt.Sprintf("%.3f", p)
	case p == 0:
		return "0"
	default:
		return fmt.Sprintf("%.1e", p)
	}
}

// Outcome is a pair's outcome code in words ("not_comparable" reads "not
// comparable").
func Outcome(code string) string { return strings.ReplaceAll(code, "_", " ") }

// Shown is the reading of a pair whose difference Holm's procedure rejects
// at the family-wise level alpha.
func Shown(alpha float64) string {
	return fmt.Sprintf("shown at α = %.2f after Holm", alpha)
}

// NotShown is the reading of a pair whose difference it does not reject: not
// shown, never "equal".
func NotShown(alpha float64) string {
	return fmt.Sprintf("no difference shown at α = %.2f after Holm", alpha)
}

// BelowDetectable is the reading of a pair not shown whose difference is
// smaller than the one the design states its task count can detect.
func BelowDetectable(delta, detectable float64) string {
	return fmt.Sprintf("not shown: |Δ| %.3f is below the %.3f the design states this task count can detect at 80%% power", math.Abs(delta), detectable)
}

// Percent is a rate as a percentage, one decimal: "42.5%".
func Percent(v float64) string {
	if !finite(v) {
		return Missing
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

// PBest is a probability of being best: two decimals, as the design's bar
// is written.
func PBest(v float64) string {
	if !finite(v) {
		return Missing
	}
	return fmt.Sprintf("%.2f", v)
}

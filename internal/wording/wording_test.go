package wording

import (
	"math"
	"testing"
)

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Value(0.4), "0.400"},
		{Value(math.NaN()), Missing},
		{Signed(0.1), "+0.100"},
		{Signed(-0.05), "-0.050"},
		{Signed(math.Inf(1)), Missing},
		{Interval(0.4, 0.25, 0.5604), "0.400 [0.250, 0.560]"},
		{SignedInterval(0.1, -0.05, 0.25), "+0.100 [-0.050, +0.250]"},
		{P(0.0123), "0.012"},
		{P(3e-7), "3.0e-07"},
		{P(0), "0"},
		{Outcome("not_comparable"), "not comparable"},
		{Shown(0.05), "shown at α = 0.05 after Holm"},
		{NotShown(0.05), "no difference shown at α = 0.05 after Holm"},
		{BelowDetectable(-0.1, 0.4), "not shown: |Δ| 0.100 is below the 0.400 the design states this task count can detect at 80% power"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

package report

import (
	"math"
	"testing"

	"gonum.org/v1/plot"
)

func TestFormat(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	for _, tc := range []struct{ name, got, want string }{
		{"p large", pval(0.0412), "0.041"},
		{"p tiny stays visible", pval(3.2e-7), "3.2e-07"},
		{"bytes GiB", bytesText(i(6_100_000_000)), "5.68 GiB"},
		{"bytes MiB", bytesText(i(300 << 20)), "300 MiB"},
		{"bytes missing", bytesText(nil), Missing},
		{"seconds", secondsText(f(12.34)), "12.3 s"},
		{"minutes", secondsText(f(252)), "4m 12s"},
		{"hours", secondsText(f(7380)), "2h 03m"},
		{"energy measured", energyText(f(5400), "NVML"), "5.4 kJ (NVML)"},
		{"energy estimate labelled", energyText(f(800), "estimate"), "≈ 800 J (estimate)"},
		{"energy missing", energyText(nil, "RAPL"), Missing},
		{"digest short", short("sha256:8f2c1e9a7b3d4c5e6f70"), "8f2c1e9a7b3d"},
		{"slug", slug("Code edits via Aider!"), "code-edits-via-aider"},
		{"slug empty", slug("→"), "x"},
		{"licence line", Licence{"gemma3-4b", "registry#gemma", "internal evaluation", "allowed"}.Line(), "gemma3-4b (registry#gemma, internal evaluation: allowed)"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, r := range [][2]float64{{-0.33, 0.13}, {0, 1.08}, {1, 5}, {0.35, 0.65}, {-120, 40}, {2, 2}} {
		ticks := niceTicks{}.Ticks(r[0], r[1])
		labelled := 0
		for j, tk := range ticks {
			if tk.Value < r[0]-1e-9 || tk.Value > r[1]+1e-9 {
				t.Errorf("range %v: tick %v outside it", r, tk.Value)
			}
			if j > 0 && tk.Value <= ticks[j-1].Value {
				t.Errorf("range %v: ticks not increasing at %v", r, tk.Value)
			}
			if tk.Label != "" {
				labelled++
			}
			if r[0] < 0 && r[1] > 0 && tk.Value == 0 && tk.Label != "0" && tk.Label != "0.0" && tk.Label != "0.00" {
				t.Errorf("range %v: zero labelled %q", r, tk.Label)
			}
		}
		if r[1] > r[0] && (labelled < 3 || labelled > 11) {
			t.Errorf("range %v: %d labelled ticks, want 3 to 11", r, labelled)
		}
		if r[0] < 0 && r[1] > 0 && !hasZero(ticks) {
			t.Errorf("range %v spans zero but has no tick at zero", r)
		}
	}
}

func hasZero(ts []plot.Tick) bool {
	for _, tk := range ts {
		if math.Abs(tk.Value) < 1e-12 && tk.Label != "" {
			return true
		}
	}
	return false
}

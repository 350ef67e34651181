package replaycost

import (
	"math"
	"regexp"
	"strings"
	"testing"
)

// TestReplayBenchTextSaysThreads: the cost ratio compares runs on
// different thread counts (the original on its pin, the scorer on every
// core), so the table and the prefill line say both.
func TestReplayBenchTextSaysThreads(t *testing.T) {
	b := ReplayBench{Model: "m", Costs: []ReplayCost{{Runtime: "llama-server", MaxTokens: 256, Rows: 3, Reproduced: 3, MeanTokens: 256,
		OriginalMS: 4000, ReplayMS: 4100, Ratio: 1.025, Goal: 1.2, Pass: true, Threads: 1, PrefillThreads: 2,
		PrefillRows: 3, PrefillReproduced: 3, PrefillMS: 1300, PrefillRatio: 0.325, PrefillFloor: 0.42}}}
	var s strings.Builder
	if err := b.WriteText(&s); err != nil {
		t.Fatal(err)
	}
	out := s.String()
	if !regexp.MustCompile(`(?m)^\s*runtime\s+threads\s+cap`).MatchString(out) || !regexp.MustCompile(`(?m)^\s*llama-server\s+1\s+256\s+3`).MatchString(out) {
		t.Errorf("the table does not give the original's threads:\n%s", out)
	}
	if !strings.Contains(out, "(scorer on 2 threads), against 4000.0 ms generated (on 1 thread): 0.325×") {
		t.Errorf("the prefill line does not give both thread counts:\n%s", out)
	}
}

func TestLineFit(t *testing.T) {
	xs := []float64{16, 64, 128, 16, 64, 128}
	ys := make([]float64, len(xs))
	for i, x := range xs {
		ys[i] = 300 + 35*x
	}
	slope, icept, r2 := lineFit(xs, ys)
	if math.Abs(slope-35) > 1e-9 || math.Abs(icept-300) > 1e-9 || math.Abs(r2-1) > 1e-9 {
		t.Errorf("fit of an exact line: slope %g, intercept %g, R² %g; want 35, 300, 1", slope, icept, r2)
	}
	ys[0] += 400
	if _, _, r2 := lineFit(xs, ys); r2 >= 1 || r2 <= 0 {
		t.Errorf("R² %g for a noisy line, want in (0, 1)", r2)
	}
}

package stats

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestBenchStatsSmall runs the self-check at a reduced size so that go test
// stays quick; `rig bench stats` runs it at full size.
func TestBenchStatsSmall(t *testing.T) {
	var out bytes.Buffer
	res, err := BenchStats(context.Background(), &out, BenchOptions{Seed: 3, NullStudies: 40, NullTasks: 60, CoverageSims: 200, CoverageResamples: 1000, PowerSims: 400, PowerTasks: 120,
		PassCoverage: CoverageOptions{Sims: 100, Rates: []float64{0.05, 0.5}, Tasks: []int{20}}})
	if err != nil {
		t.Fatal(err)
	}
	// Null (2), bootstrap coverage (2), pass-rate coverage (mean and lowest
	// for arm rates and deltas at 1 and 3 repeats: 8), power (2).
	if len(res.Checks) != 14 {
		t.Fatalf("%d checks, want 14:\n%s", len(res.Checks), out.String())
	}
	if res.Checks[0].Got > 0.05 {
		t.Errorf("null winner rate %v > 0.05", res.Checks[0].Got)
	}
	for _, c := range res.Checks {
		if !strings.Contains(out.String(), c.Name) {
			t.Errorf("check %q not printed", c.Name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := BenchStats(ctx, &out, BenchOptions{}); err == nil {
		t.Error("cancelled context did not stop BenchStats")
	}
}

// TestBenchStatsFull is the full-size self-check (about 30 s on 2 cores);
// it runs only with RIG_BENCH_STATS_FULL=1.
func TestBenchStatsFull(t *testing.T) {
	if os.Getenv("RIG_BENCH_STATS_FULL") != "1" {
		t.Skip("set RIG_BENCH_STATS_FULL=1 to run the full statistics self-check")
	}
	var out bytes.Buffer
	res, err := BenchStats(context.Background(), &out, BenchOptions{Seed: 1})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass {
		t.Fatal("a statistics check failed")
	}
}

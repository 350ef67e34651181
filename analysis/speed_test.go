package analysis

import (
	"math"
	"testing"
)

func TestSpeedCardPercentilesAndDeltas(t *testing.T) {
	in := improvedInput(4, 2)
	nb, nc := 0, 0
	for i := range in.Trials {
		tr := &in.Trials[i]
		switch tr.Arm {
		case "base":
			// TTFT 1..100 ms (each thrice), TPOT 50 ms, 100 prompt tok/s.
			tr.TTFTMS, tr.TPOTMS, tr.PromptTokS, tr.GenTokS = float64(nb%100+1), 50, 100, 20
			nb++
		case "cand":
			// The challenger leaves its first ten trials untimed (a harness
			// that hides the runtime's timings), the rest twice as fast.
			if nc >= 10 {
				tr.TTFTMS, tr.TPOTMS, tr.PromptTokS, tr.GenTokS = 25, 25, 150, 40
			}
			nc++
		}
	}
	rep := analyseT(t, in)
	got := map[string]Speed{}
	for _, s := range rep.Speed {
		got[s.Arm] = s
	}
	b, c := got["base"], got["cand"]
	// Type-7 over 1..100 (each thrice): p50 50.5, p99 99.01.
	if b.Timed != 300 || math.Abs(float64(b.TTFTP50MS)-50.5) > 1e-9 || math.Abs(float64(b.TTFTP99MS)-99.01) > 1e-9 || float64(b.TPOTP99MS) != 50 || b.Delta != nil {
		t.Errorf("base speed %+v, want 300 timed, TTFT p50 50.5 and p99 99.01 ms, TPOT 50 ms, no delta", b)
	}
	if c.Timed != 290 || float64(c.PromptTokS) != 150 || float64(c.GenTokS) != 40 || c.Delta == nil {
		t.Fatalf("cand speed %+v, want 290 timed trials at 150 and 40 tok/s, with a delta", c)
	}
	d := c.Delta
	if float64(d.PromptTokS) != 0.5 || float64(d.GenTokS) != 1 || float64(d.TPOTP50) != -0.5 || math.Abs(float64(d.TTFTP50)-(25-50.5)/50.5) > 1e-12 || float64(d.Wall) != -0.5 {
		t.Errorf("cand delta %+v, want +50%% prompt, +100%% gen, -50%% TPOT, TTFT (25-50.5)/50.5, wall -50%%", d)
	}
	if float64(c.Cost.MeanWallSeconds) != 2 || float64(b.Cost.MeanWallSeconds) != 4 {
		t.Errorf("the card's wall time %v and %v, want 2 and 4 s", c.Cost.MeanWallSeconds, b.Cost.MeanWallSeconds)
	}
}

// A decision recorded before the receipts carried timings stays current:
// the speed card's figures are not in the comparison hash.
func TestComparisonHashIgnoresTimings(t *testing.T) {
	in := improvedInput(1, 2)
	before, err := ComparisonHash(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Trials[0].TTFTMS, in.Trials[0].TPOTMS, in.Trials[0].PromptTokS, in.Trials[0].GenTokS = 12, 3, 400, 30
	after, err := ComparisonHash(in)
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Errorf("timings changed the comparison hash: %s → %s", before, after)
	}
	in.Trials[0].WallSeconds++
	if again, _ := ComparisonHash(in); again == before {
		t.Error("a changed wall time left the comparison hash as it was: the test compares nothing")
	}
}

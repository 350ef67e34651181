package analysis

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// One slot: trials one after another are charged their own wall time and
// energy, as before slots existed.
func TestChargesAloneAreTheTrialsOwn(t *testing.T) {
	trials := []Trial{
		{Arm: "a", JobKind: "k", Task: "t1", StartMS: 1000, WallSeconds: 2, EnergyJoules: 30, EnergySource: EnergyNVML, Tokens: 10, OutputTokens: 5, PeakMemoryBytes: 100, Slots: 1},
		{Arm: "a", JobKind: "k", Task: "t2", StartMS: 3000, WallSeconds: 1, EnergyJoules: 10, EnergySource: EnergyNVML, Tokens: 10, OutputTokens: 5, PeakMemoryBytes: 200, Slots: 1},
	}
	c := costOf(trials, "a", "k")
	if !near(float64(c.TotalWallSeconds), 3) || !near(float64(c.MeanEnergyJoules), 20) {
		t.Fatalf("alone: wall %v, energy %v; want 3 s and 20 J", c.TotalWallSeconds, c.MeanEnergyJoules)
	}
	if c.Load.Shared != 0 || c.LoadNote != "" || c.Load.Slots != 1 {
		t.Fatalf("alone: load %+v, note %q", c.Load, c.LoadNote)
	}
	if !near(float64(c.Load.TrialsPerS), 2.0/3) || !near(float64(c.Load.OutputTokS), 10.0/3) {
		t.Fatalf("alone: %v trials/s, %v tok/s; want 2/3 and 10/3", c.Load.TrialsPerS, c.Load.OutputTokS)
	}
}

// Two in flight: the round's span is charged once, split by token rate,
// and the counter's energy over it once; the peak is the round's for both.
func TestChargesShareARound(t *testing.T) {
	// a1: [0,4] s, 40 tokens (10/s); a2: [2,4] s, 40 tokens (20/s). A 10 W
	// counter read over each one's own interval: 40 J and 20 J.
	trials := []Trial{
		{Arm: "a", JobKind: "k", Task: "t1", StartMS: 10_000, WallSeconds: 4, EnergyJoules: 40, EnergySource: EnergyNVML, Tokens: 40, OutputTokens: 20, PeakMemoryBytes: 100, Slots: 2},
		{Arm: "a", JobKind: "k", Task: "t2", StartMS: 12_000, WallSeconds: 2, EnergyJoules: 20, EnergySource: EnergyNVML, Tokens: 40, OutputTokens: 20, PeakMemoryBytes: 300, Slots: 2},
		{Arm: "b", JobKind: "k", Task: "t1", StartMS: 10_000, WallSeconds: 4, EnergyJoules: 40, EnergySource: EnergyNVML, Tokens: 40, Slots: 1},
	}
	ch := chargesOf(trials, "a")
	// [0,2]: a1 alone → 2 s, 20 J. [2,4]: rates 10 and 20 → a1 1/3, a2 2/3.
	if !near(ch[0].seconds, 2+2.0/3) || !near(ch[1].seconds, 4.0/3) {
		t.Fatalf("seconds %v, %v; want 2.667 and 1.333", ch[0].seconds, ch[1].seconds)
	}
	if !near(ch[0].joules+ch[1].joules, 40) || !near(ch[1].joules, 40.0/3) {
		t.Fatalf("joules %v + %v; want 40 in all, 13.33 for a2", ch[0].joules, ch[1].joules)
	}
	if ch[0].peak != 300 || ch[1].peak != 300 {
		t.Fatalf("peaks %d, %d; want the round's 300 for both", ch[0].peak, ch[1].peak)
	}
	c := costOf(trials, "a", "k")
	if !near(float64(c.TotalWallSeconds), 4) || c.Load.Shared != 2 || c.Load.Slots != 2 || c.LoadNote == "" {
		t.Fatalf("cost %+v", c)
	}
	if !near(float64(c.Load.TrialsPerS), 0.5) || !near(float64(c.Load.OutputTokS), 10) || !near(float64(c.Load.WallP50Seconds), 3) {
		t.Fatalf("load %+v; want 0.5 trials/s, 10 tok/s, p50 wall 3 s", c.Load)
	}
	// A preempted neighbour takes its share and is not charged.
	trials[1].Preempted = true
	c = costOf(trials, "a", "k")
	if c.Trials != 1 || !near(float64(c.TotalWallSeconds), 2+2.0/3) {
		t.Fatalf("with a preempted neighbour: %d trials, %v s; want 1 and 2.667", c.Trials, c.TotalWallSeconds)
	}
}

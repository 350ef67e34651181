package run

import (
	"testing"
	"time"

	"rig/receipts"
	"rig/studies"
)

func trials(arms ...string) []studies.Trial {
	var out []studies.Trial
	for _, a := range arms {
		out = append(out, studies.Trial{Key: studies.TrialKey{Arm: a}})
	}
	return out
}

// A slow arm's remaining trials are priced at its own speed, not at the
// average of the fast arm that happened to run first.
func TestETAPricesEachArmAtItsOwnSpeed(t *testing.T) {
	e := newETA(map[string]time.Duration{"fast": 2 * time.Second, "slow": 60 * time.Second})
	// Before anything is measured: the dry run's table.
	if got := e.left(trials("fast", "slow", "slow")); got != 122*time.Second {
		t.Errorf("unmeasured ETA = %s, want 2m2s from the dry run's prices", got)
	}
	for range 4 {
		e.observe("fast", time.Second)
	}
	// fast measured at 1s; slow still at its price.
	if got := e.left(trials("fast", "slow", "slow")); got != 121*time.Second {
		t.Errorf("ETA = %s, want 1s + 2×60s", got)
	}
	e.observe("slow", 90*time.Second)
	if got := e.left(trials("fast", "slow", "slow")); got != 181*time.Second {
		t.Errorf("ETA = %s, want 1s + 2×90s measured", got)
	}
	// No price and no measurement: the mean of what was measured, never zero.
	noPrice := newETA(nil)
	noPrice.observe("a", 10*time.Second)
	if got := noPrice.left(trials("b")); got != 10*time.Second {
		t.Errorf("ETA of an unpriced, unmeasured arm = %s, want the measured mean 10s", got)
	}
}

// The ETA prices only what is left: trials after the current one that have
// no counted receipt (a resumed execution has some already).
func TestRemainingSkipsCountedTrials(t *testing.T) {
	plan := &studies.Plan{Trials: []studies.Trial{
		{Key: studies.TrialKey{Arm: "a", Task: "t1"}},
		{Key: studies.TrialKey{Arm: "b", Task: "t1"}},
		{Key: studies.TrialKey{Arm: "a", Task: "t2"}},
	}}
	counted := map[receipts.TrialKey]receipts.Receipt{receiptTrial(plan.Trials[2].Key): {}}
	if got := remaining(plan, -1, counted); len(got) != 2 || got[1].Key.Arm != "b" {
		t.Errorf("remaining before the first trial = %+v, want t1 of a and b", got)
	}
	if got := remaining(plan, 0, counted); len(got) != 1 || got[0].Key.Arm != "b" {
		t.Errorf("remaining after the first trial = %+v, want b's t1 only", got)
	}
}

// Partway through a stretch of trials in flight, the ETA prices the
// stretch's unfinished trials at the share of its time each ended one
// took (4 ended in 8 s at 4 slots: 2 s each, not each one's own 8 s), and
// the trials after it as before.
func TestETACountsSlots(t *testing.T) {
	e := newETA(map[string]time.Duration{"a": 10 * time.Second})
	if got := e.leftInFlight("a", 8*time.Second, 4, 6, trials("a", "a")); got != 6*2*time.Second+2*10*time.Second {
		t.Errorf("ETA in a stretch = %s, want 6×2s + 2×10s", got)
	}
	// Nothing ended yet: the arm's price.
	if got := e.leftInFlight("a", 3*time.Second, 0, 3, nil); got != 30*time.Second {
		t.Errorf("ETA before the first end = %s, want 3×10s", got)
	}
}

package analysis

import (
	"math"
	"testing"
)

func TestMinDetectable(t *testing.T) {
	tests := []struct {
		n          int
		psi, alpha float64
		ok         bool
	}{
		{n: 200, psi: 0.3, alpha: 0.05 / 7, ok: true},
		{n: 50, psi: 0.4, alpha: 0.05, ok: true},
		{n: 1000, psi: 0.1, alpha: 0.05 / 14, ok: true},
		{n: 8, psi: 0.1, alpha: 0.05 / 7, ok: false}, // too few tasks to see anything
	}
	for _, tc := range tests {
		d, ok := MinDetectable(tc.n, tc.psi, tc.alpha, 0.8)
		if ok != tc.ok {
			t.Fatalf("MinDetectable(%d, %v, %v) ok=%v, want %v", tc.n, tc.psi, tc.alpha, ok, tc.ok)
		}
		if !ok {
			continue
		}
		if p := McNemarPower(tc.n, tc.psi, d, tc.alpha); p < 0.8 {
			t.Errorf("n=%d: power at the returned %v is %v < 0.8", tc.n, d, p)
		}
		if p := McNemarPower(tc.n, tc.psi, d-1e-4, tc.alpha); p >= 0.8 {
			t.Errorf("n=%d: a smaller lead %v already has power %v; %v is not the smallest", tc.n, d-1e-4, p, d)
		}
		// The inverse: that many tasks are (about) what the lead needs.
		need, ok := TasksNeeded(d, tc.psi, tc.alpha, 0.8)
		if !ok || need > tc.n || need < tc.n*9/10 {
			t.Errorf("TasksNeeded(%v) = %d, %v; want close to %d", d, need, ok, tc.n)
		}
	}
}

func TestPowerGrowsWithLead(t *testing.T) {
	prev := -1.0
	for _, d := range []float64{0, 0.02, 0.05, 0.1, 0.2, 0.3} {
		p := McNemarPower(150, 0.3, d, 0.01)
		if p < prev {
			t.Fatalf("power fell from %v to %v as the lead grew to %v", prev, p, d)
		}
		prev = p
	}
	if p := McNemarPower(150, 0.3, 0, 0.01); p > 0.005 {
		t.Errorf("power with no lead %v exceeds alpha/2", p)
	}
}

func TestPlanPower(t *testing.T) {
	small := PlanPower(PowerPlan{PilotDiscordance: 0.3, Tasks: 100}, 0.05, 7)
	large := PlanPower(PowerPlan{PilotDiscordance: 0.3, Tasks: 800}, 0.05, 7)
	if math.Abs(small.Alpha-0.05/7) > 1e-15 || small.Power != 0.8 {
		t.Fatalf("plan %+v: want Holm's first step 0.05/7 and default power 0.8", small)
	}
	if !small.MinDetectable.Valid() || !large.MinDetectable.Valid() || !(large.MinDetectable < small.MinDetectable) {
		t.Errorf("more tasks must see smaller leads: 100 → %v, 800 → %v", small.MinDetectable, large.MinDetectable)
	}
	none := PlanPower(PowerPlan{PilotDiscordance: 0.05, Tasks: 10}, 0.05, 7)
	if none.MinDetectable.Valid() {
		t.Errorf("10 tasks at 5%% discordance cannot detect anything, got %v", none.MinDetectable)
	}
}

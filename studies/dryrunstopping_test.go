package studies

import (
	"bytes"
	"strings"
	"testing"
)

// A design with a stopping rule is priced three ways: under the stated
// difference (expected to stop early, so cheaper), under no difference,
// and at most the whole plan. The expected trials never pass the maximum,
// and the stated difference's are below it.
func TestDryRunPricesTheStoppingRule(t *testing.T) {
	d := demoDesign(t)
	d.Stopping = &Stopping{Method: StopAnytime, Futility: &Futility{}}
	if d.Power.SmallestDetectableDifference == 0 {
		d.Power.SmallestDetectableDifference = 0.3
	}
	p, err := NewPlan(d, demoTasks(40, 4), PlanOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	e, err := DryRun(d, p, demoSpeeds(), nil)
	if err != nil {
		t.Fatalf("DryRun: %v", err)
	}
	sp := e.Stopping
	if sp == nil || len(sp.Scenarios) != 2 || sp.MaxTrials != e.Trials || sp.MaxWallTime != e.WallTime {
		t.Fatalf("stopping price %+v, estimate %d trials", sp, e.Trials)
	}
	for _, s := range sp.Scenarios {
		if s.Trials > float64(e.Trials) || s.WallTime > e.WallTime || s.Share <= 0 || s.Share > 1 {
			t.Errorf("%s: %+v is above the maximum or not a share", s.Name, s)
		}
	}
	if stated := sp.Scenarios[0]; stated.Lead == 0 || stated.Trials >= float64(e.Trials) || stated.Stopped == 0 {
		t.Errorf("under the stated difference %+v: expected to stop early in some studies", stated)
	}
	var b bytes.Buffer
	if err := e.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "under no difference: expected") || !strings.Contains(b.String(), "at most:") {
		t.Errorf("table lacks the stopping rule's price:\n%s", b.String())
	}
	d.Stopping = nil
	if e, _ := DryRun(d, p, demoSpeeds(), nil); e.Stopping != nil {
		t.Error("a design without a stopping rule got a stopping price")
	}
}

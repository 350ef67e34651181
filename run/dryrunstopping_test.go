package run

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"rig/studies"
	"rig/studies/studytest"
)

// A design with a stopping rule is priced four ways: under the stated
// difference (expected to stop early, so cheaper), under no difference,
// with arms that agree on every task, and at most the whole plan. The expected trials never pass the maximum,
// and the stated difference's are below it.
func TestDryRunPricesTheStoppingRule(t *testing.T) {
	d := studytest.DemoDesign(t)
	d.Stopping = &studies.Stopping{Method: studies.StopAnytime, Futility: &studies.Futility{}}
	if d.Power.SmallestDetectableDifference == 0 {
		d.Power.SmallestDetectableDifference = 0.3
	}
	tasks := map[string][]string{}
	for _, jk := range d.JobKinds {
		for i := range 40 {
			tasks[jk.Name] = append(tasks[jk.Name], fmt.Sprintf("%s-%02d", jk.Name, i))
		}
	}
	p, err := studies.NewPlan(d, tasks, studies.PlanOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	speeds := studies.SpeedTable{}
	for _, a := range d.Arms {
		speeds[a.Name] = studies.Speed{GenTokensPerSec: 100, PromptTokensPerSec: 1000, LoadSeconds: 2, Watts: 100, Source: studies.SourceMeasured}
	}
	e, err := studies.DryRun(d, p, speeds, nil)
	if err != nil {
		t.Fatalf("DryRun: %v", err)
	}
	if e.Stopping != nil {
		t.Fatal("studies.DryRun priced the stopping rule itself: the simulation is the analysis's")
	}
	sp, err := PriceStopping(context.Background(), d, p, e)
	if err != nil {
		t.Fatal(err)
	}
	if sp == nil || len(sp.Scenarios) != 3 || sp.MaxTrials != e.Trials || sp.MaxWallTime != e.WallTime {
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
	// Arms that agree on every task settle as futile in every study (issue
	// 46: the price promised early stops a study of agreeing arms never got).
	if agree := sp.Scenarios[2]; agree.Lead != 0 || agree.Stopped != 1 || agree.Trials >= float64(e.Trials) || !strings.Contains(agree.Name, "agreeing") {
		t.Errorf("arms agreeing on every task: %+v, want a stop before the %d trials in every study", agree, e.Trials)
	}
	e.Stopping = sp
	var b bytes.Buffer
	if err := e.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "under no difference: expected") || !strings.Contains(b.String(), "at most:") {
		t.Errorf("table lacks the stopping rule's price:\n%s", b.String())
	}
	d.Stopping = nil
	if sp, err := PriceStopping(context.Background(), d, p, e); sp != nil || err != nil {
		t.Errorf("a design without a stopping rule got a stopping price %+v (%v)", sp, err)
	}
}

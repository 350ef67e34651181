package scaleout

import (
	"strings"
	"testing"

	"rig/studies"
)

// The engine checks a stopping rule between blocks (CheckStop), so a design
// with one is submitted like any other; a judged job kind is still refused
// before anything is submitted, naming the way out.
func TestCheckDesignTakesAStoppingRule(t *testing.T) {
	d := &studies.Design{JobKinds: []studies.JobKind{{Name: "jk", Grader: studies.Grader{Name: "json", Version: 1}}}}
	if err := CheckDesign(d); err != nil {
		t.Fatalf("a design without a stopping rule: %v", err)
	}
	d.Stopping = &studies.Stopping{Method: studies.StopAnytime}
	if err := CheckDesign(d); err != nil {
		t.Fatalf("a design with a stopping rule: %v", err)
	}
	d.JobKinds[0].Grader.Name = studies.JudgeGrader
	err := CheckDesign(d)
	if err == nil || !strings.Contains(err.Error(), "judge") || !strings.Contains(err.Error(), "without --engine") {
		t.Fatalf("a judged job kind: %v, want a refusal naming the judge and the daemon's own card", err)
	}
}

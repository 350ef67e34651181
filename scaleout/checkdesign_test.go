package scaleout

import (
	"strings"
	"testing"

	"rig/studies"
)

// The engine runs chunks on many workers with no check between blocks, so
// a design with a stopping rule is refused before anything is submitted,
// naming the field and the way out; without one the same design passes.
func TestCheckDesignRefusesAStoppingRule(t *testing.T) {
	d := &studies.Design{JobKinds: []studies.JobKind{{Name: "jk", Grader: studies.Grader{Name: "json", Version: 1}}}}
	if err := CheckDesign(d); err != nil {
		t.Fatalf("a design without a stopping rule: %v", err)
	}
	d.Stopping = &studies.Stopping{Method: studies.StopAnytime}
	err := CheckDesign(d)
	if err == nil || !strings.Contains(err.Error(), "design field stopping") || !strings.Contains(err.Error(), "without --engine") {
		t.Fatalf("got %v, want a refusal naming stopping and the daemon's own card", err)
	}
}

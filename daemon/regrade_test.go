package daemon

import (
	"testing"

	"rig/run"
)

// TestRegradeReportText: the runner's re-grade reaches the reply with the
// study named, every row and the totals (cmd/rig's printRegrade prints it:
// TestPrintRegrade).
func TestRegradeReportText(t *testing.T) {
	rows := []run.RegradeRow{
		{JobKind: "qa", Task: "capital", Arm: "a", Repeat: 1, OldGrader: "exact@v1", OldScore: 1, OldPass: true, NewGrader: "exact@v2", NewScore: 1, NewPass: true},
		{JobKind: "qa", Task: "capital", Arm: "b", Repeat: 1, OldGrader: "exact@v1", NewGrader: "exact@v2", NewScore: 1, NewPass: true, Changed: true},
		{JobKind: "qa", Task: "sum", Arm: "a", Repeat: 1, OldGrader: "exact@v1", OldScore: 1, OldPass: true, NewGrader: "exact@v2", NewScore: 1, NewPass: true},
		{JobKind: "qa", Task: "sum", Arm: "b", Repeat: 1, OldGrader: "exact@v1", NewGrader: "exact@v2", AlreadyHad: true},
	}
	rep := apiRegrade("s1", &run.RegradeReport{Execution: "exec-1", Rows: rows, Written: 3, Changed: 1, Skipped: []string{"c|sum|1: preempted, nothing to re-grade"}})
	if rep.Study != "s1" || rep.Execution != "exec-1" || len(rep.Rows) != 4 || rep.Written != 3 || rep.Changed != 1 || len(rep.Skipped) != 1 {
		t.Fatalf("reply %+v; want the study, the execution, 4 rows, 3 written, 1 changed, 1 skipped", rep)
	}
	if !rep.Rows[1].Changed || rep.Rows[1].Arm != "b" || !rep.Rows[3].AlreadyHad {
		t.Errorf("rows %+v; want b/capital changed and b/sum stored earlier", rep.Rows)
	}
}

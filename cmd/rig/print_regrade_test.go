package main

import (
	"strings"
	"testing"

	"rig/api"
)

// TestPrintRegrade: the re-grade's text gives the per-task comparison, the
// rows stored earlier, what was skipped, and the totals line.
func TestPrintRegrade(t *testing.T) {
	rep := api.RegradeReport{Study: "s1", Execution: "exec-1", Written: 3, Changed: 1, Skipped: []string{"c|sum|1: preempted, nothing to re-grade"},
		Rows: []api.RegradeRow{
			{JobKind: "qa", Task: "capital", Arm: "a", Repeat: 1, OldGrader: "exact@v1", OldScore: 1, OldPass: true, NewGrader: "exact@v2", NewScore: 1, NewPass: true},
			{JobKind: "qa", Task: "capital", Arm: "b", Repeat: 1, OldGrader: "exact@v1", NewGrader: "exact@v2", NewScore: 1, NewPass: true, Changed: true},
			{JobKind: "qa", Task: "sum", Arm: "a", Repeat: 1, OldGrader: "exact@v1", OldScore: 1, OldPass: true, NewGrader: "exact@v2", NewScore: 1, NewPass: true},
			{JobKind: "qa", Task: "sum", Arm: "b", Repeat: 1, OldGrader: "exact@v1", NewGrader: "exact@v2", AlreadyHad: true},
		}}
	var sb strings.Builder
	if err := printRegrade(&sb, rep); err != nil || !strings.Contains(sb.String(), "4 trials re-graded, 1 changed") {
		t.Errorf("summary = %q, %v", sb.String(), err)
	}
	for _, want := range []string{"study s1, execution exec-1", "changed", "(stored earlier)", "skipped: c|sum|1", "exact@v2 1.00 pass"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("text %q lacks %q", sb.String(), want)
		}
	}
}

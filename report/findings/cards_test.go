package findings

import (
	"testing"

	"rig/analysis"
	"rig/preflight"
)

func TestWithoutCellsDropsUnfitCells(t *testing.T) {
	in := analysis.Input{
		Design: analysis.Design{
			Arms:  []analysis.Arm{{Name: "a@big"}, {Name: "a@small"}, {Name: "b@big"}},
			Pairs: []analysis.Pair{{Candidate: "a@small", Baseline: "a@big"}},
			Rule:  analysis.Rule{Clauses: []analysis.Clause{{If: []analysis.Condition{{Candidate: "a@small", Baseline: "a@big"}}, Then: "x"}}},
		},
		Trials: []analysis.Trial{{Arm: "a@big"}, {Arm: "a@small"}, {Arm: "b@big"}},
	}
	out := withoutCells(in, map[string]preflight.Verdict{"a@small": {}})
	if len(out.Design.Arms) != 2 || len(out.Design.Pairs) != 0 || len(out.Design.Rule.Clauses) != 0 || len(out.Trials) != 2 {
		t.Fatalf("a@small not dropped everywhere: %+v", out)
	}
	for _, tr := range out.Trials {
		if tr.Arm == "a@small" {
			t.Error("a@small's trial kept")
		}
	}
}

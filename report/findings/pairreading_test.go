package findings

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"rig/analysis"
	"rig/report"
	"rig/studies"
)

// TestPageAndSummaryReadAPairAlike: the CLI summary and the report page
// word a pair that was not shown the same way; the CLI once said "tie (no
// signal)" where the page said "not shown" for the same pair (issue 46).
func TestPageAndSummaryReadAPairAlike(t *testing.T) {
	for _, tc := range []struct {
		name       string
		base, cand func(task int) bool
	}{
		{"no signal (both fail everything)", func(int) bool { return false }, func(int) bool { return false }},
		{"no difference in any task", func(i int) bool { return i%2 == 0 }, func(i int) bool { return i%2 == 0 }},
		{"a small difference not shown", func(i int) bool { return i%2 == 0 }, func(i int) bool { return i%2 == 0 || i == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var trials []analysis.Trial
			for i := range 40 {
				for arm, pass := range map[string]func(int) bool{"base": tc.base, "cand": tc.cand} {
					trials = append(trials, analysis.Trial{DesignHash: "d1", Arm: arm, JobKind: "apply", Task: fmt.Sprintf("t%03d", i), Pass: pass(i), WallSeconds: 1})
				}
			}
			d := analysis.Design{Hash: "d1", Arms: []analysis.Arm{{Name: "base"}, {Name: "cand"}}, Incumbent: "base", Pairs: []analysis.Pair{{Candidate: "cand", Baseline: "base"}},
				JobKinds: []analysis.JobKind{{Name: "apply", Measure: analysis.MeasurePass}}, Seed: 1,
				Rule:  analysis.Rule{Clauses: []analysis.Clause{{If: []analysis.Condition{{Outcomes: []analysis.Outcome{analysis.Improvement}, Candidate: "cand", Baseline: "base"}}, Then: "accept cand"}}},
				Power: &analysis.PowerPlan{PilotDiscordance: 0.3, Tasks: 40, SmallestDifference: 0.2}}
			rep, err := analysis.Analyse(context.Background(), analysis.Input{Design: d, Trials: trials})
			if err != nil {
				t.Fatal(err)
			}
			sd := &studies.Design{}
			sd.Power.SmallestDetectableDifference = 0.2
			jk := report.Kind{Detectable: &sd.Power.SmallestDetectableDifference}
			kindBuilder{ev: &Evidence{Design: sd}, rep: rep}.pairs(&jk, "apply")
			if len(jk.Pairs) != 1 || jk.Pairs[0].NotShown == "" {
				t.Fatalf("page pairs %+v, want one pair read as not shown", jk.Pairs)
			}
			page := jk.Pairs[0].NotShown
			var sum strings.Builder
			if err := rep.WriteSummary(&sum); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(sum.String(), page) {
				t.Errorf("the page reads the pair %q; the CLI summary does not:\n%s", page, sum.String())
			}
			for _, bad := range []string{"(no signal)", "(no difference in any task)"} {
				if strings.Contains(sum.String(), bad) {
					t.Errorf("the CLI summary reads the pair %s where the page reads %q", bad, page)
				}
			}
		})
	}
}

package run

import (
	"math"
	"strings"
	"testing"

	"rig/analysis"
)

// crossedAtCheck2 is a group-sequential look at check 3 for a pair that
// crossed at check 2 (statistic 7 against a boundary of 6) and whose later
// check, after the crossing, is not a look and so has no boundary.
func crossedAtCheck2() analysis.Sequential {
	nan := analysis.Num(math.NaN())
	pl := analysis.PairLook{Pair: analysis.Pair{Candidate: "cand", Baseline: "base"}, JobKind: "apply", Status: analysis.StatusCrossed,
		Direction: "candidate", StoppedAt: 1, Tasks: 30, P: 0.01,
		CS:        analysis.ConfidenceSequence{Lo: -0.1, Hi: 0.6, Level: 0.975},
		Stagewise: &analysis.StagewiseInterval{Lo: 0.05, Hi: 0.5, Level: 0.975, Tasks: 20, Discordant: 9},
		Path: []analysis.LookPoint{
			{Check: 0, Tasks: 10, Look: true, Statistic: 2, Boundary: 5, FutilityBound: nan},
			{Check: 1, Tasks: 20, Look: true, Statistic: 7, Boundary: 6, FutilityBound: nan, Status: analysis.StatusCrossed},
			{Check: 2, Tasks: 30, Statistic: 8, Boundary: nan, FutilityBound: nan, Status: analysis.StatusCrossed},
		}}
	return analysis.Sequential{Stopping: analysis.Stopping{Method: analysis.GroupSequential, Alpha: 0.05},
		Look:         analysis.Look{Check: 2, Stop: true, Reason: "every monitored pair settled", Pairs: []analysis.PairLook{pl}, HolmP: []float64{0.01}},
		StoppedEarly: true}
}

// TestDescribeStopSaysWhatHappened: the audit's finish line prints a level
// with the precision it has (97.5%, not "98%"), and a pair that crossed
// says where it crossed instead of "no count could cross the boundary yet"
// (issue 46).
func TestDescribeStopSaysWhatHappened(t *testing.T) {
	line := DescribeStop(crossedAtCheck2())
	for _, want := range []string{"97.5% stagewise-exact interval [0.050, 0.500]", "statistic 7 reached the boundary 6 at check 2 (20 tasks)"} {
		if !strings.Contains(line, want) {
			t.Errorf("audit line lacks %q:\n%s", want, line)
		}
	}
	for _, bad := range []string{"98%", "no count could cross"} {
		if strings.Contains(line, bad) {
			t.Errorf("audit line says %q:\n%s", bad, line)
		}
	}
}

// TestDescribeStopUncrossed: a pair that has not crossed names the boundary
// when its last check is a look, says when no count could cross yet, and
// says when the check was not a look.
func TestDescribeStopUncrossed(t *testing.T) {
	nan := analysis.Num(math.NaN())
	for _, tc := range []struct {
		pt   analysis.LookPoint
		want string
	}{
		{analysis.LookPoint{Check: 0, Tasks: 10, Look: true, Statistic: 2, Boundary: 5}, "statistic 2 vs boundary 5 after 10 tasks"},
		{analysis.LookPoint{Check: 0, Tasks: 10, Look: true, Statistic: 2, Boundary: nan}, "statistic 2 after 10 tasks (no count could cross the boundary yet)"},
		{analysis.LookPoint{Check: 0, Tasks: 10, Statistic: 2, Boundary: nan}, "statistic 2 after 10 tasks (not a look)"},
	} {
		seq := crossedAtCheck2()
		pl := &seq.Look.Pairs[0]
		pl.Status, pl.Direction, pl.StoppedAt, pl.Stagewise = analysis.StatusContinue, "", -1, nil
		pl.CS.Level = 1 - 0.05/3
		pl.Path = []analysis.LookPoint{tc.pt}
		line := DescribeStop(seq)
		if !strings.Contains(line, tc.want) || !strings.Contains(line, "98.33% CS") {
			t.Errorf("audit line lacks %q or the 98.33%% CS level:\n%s", tc.want, line)
		}
	}
}

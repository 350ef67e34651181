package analysis

import (
	"context"
	"math"
	"testing"
)

// TestPerTaskAgreesWithAnalyse checks that the per-task values the report
// embeds give the analysis's own numbers: the sweep at every grid gate and
// each pair's flips at the design's gate.
func TestPerTaskAgreesWithAnalyse(t *testing.T) {
	d := twoArmDesign(MeasureScore)
	d.JobKinds[0].Gate = 0.6
	trials := passTrials(3, 80, map[string]float64{"base": 0.5, "cand": 0.6}, map[string]float64{"base": 1, "cand": 1})
	// Repeats that disagree, a task one arm lacks: the values are averages
	// with holes, as in a real study.
	trials = append(trials, Trial{DesignHash: "d1", Arm: "cand", JobKind: "apply", Task: "t001", Repeat: 1, Score: 0.1, WallSeconds: 1},
		Trial{DesignHash: "d1", Arm: "base", JobKind: "apply", Task: "t002", Repeat: 0, Missing: true})
	for i := range trials {
		if trials[i].Arm == "cand" {
			trials[i].Score = math.Min(1, trials[i].Score*1.15)
		}
	}
	in := Input{Design: d, Trials: trials}
	rep, err := Analyse(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	kts := PerTask(in)
	if len(kts) != len(rep.Kinds) {
		t.Fatalf("%d job kinds of per-task values, analysis has %d", len(kts), len(rep.Kinds))
	}
	for i, kr := range rep.Kinds {
		kt := kts[i]
		for _, sp := range kr.Sweep {
			got := kt.At(sp.Gate)
			for a := range sp.PassRate {
				if !same(float64(got.PassRate[a]), float64(sp.PassRate[a])) {
					t.Errorf("%s %s at gate %.2f: At gives %v, sweep %v", kr.JobKind, kt.Arms[a], sp.Gate, got.PassRate[a], sp.PassRate[a])
				}
			}
		}
		if at := kt.At(kr.Gate); !same(float64(at.PassRate[0]), float64(kr.Arms[0].PassRate)) {
			t.Errorf("%s: pass rate at the gate %v, ranking says %v", kr.JobKind, at.PassRate[0], kr.Arms[0].PassRate)
		}
		for _, pr := range rep.Pairs {
			if pr.JobKind != kr.JobKind || pr.Tasks == 0 {
				continue
			}
			p := kt.Pair(index(kt.Arms, pr.Candidate), index(kt.Arms, pr.Baseline), kr.Gate)
			if p.NewlyFixed != len(pr.NewlyFixed) || p.NewlyFailing != len(pr.NewlyFailing) || p.Paired != pr.Tasks {
				t.Errorf("%s %s vs %s: Pair gives fixed %d failing %d paired %d, analysis %d %d %d",
					kr.JobKind, pr.Candidate, pr.Baseline, p.NewlyFixed, p.NewlyFailing, p.Paired, len(pr.NewlyFixed), len(pr.NewlyFailing), pr.Tasks)
			}
		}
	}
}

func index(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func same(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

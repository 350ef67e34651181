package analysis

import (
	"fmt"
	"math/rand/v2"
)

// twoArmDesign is a design with an incumbent "base" and a challenger "cand".
func twoArmDesign(measure Measure) Design {
	return Design{
		Hash:      "d1",
		Arms:      []Arm{{Name: "base"}, {Name: "cand"}},
		JobKinds:  []JobKind{{Name: "apply", Measure: measure}},
		Pairs:     []Pair{{Candidate: "cand", Baseline: "base"}},
		Incumbent: "base",
		Seed:      42,
		Rule: Rule{Clauses: []Clause{
			{If: []Condition{{Outcomes: []Outcome{Improvement}, Candidate: "cand", Baseline: "base", MinDelta: 0.05}}, Then: "accept cand"},
			{If: []Condition{{Outcomes: []Outcome{Regression, Tradeoff}, Candidate: "cand", Baseline: "base"}}, Then: "keep the incumbent"},
		}},
	}
}

// passTrials makes one trial per task for each arm from pass probabilities,
// drawn with a seeded generator; wall seconds are per arm.
func passTrials(seed uint64, tasks int, pass map[string]float64, wall map[string]float64) []Trial {
	rng := rand.New(rand.NewPCG(seed, 9))
	var ts []Trial
	for t := range tasks {
		u := rng.Float64() // shared difficulty keeps the arms paired
		for _, arm := range []string{"base", "cand"} {
			ts = append(ts, Trial{DesignHash: "d1", Arm: arm, JobKind: "apply", Task: fmt.Sprintf("t%03d", t),
				Pass: u < pass[arm], Score: u, WallSeconds: wall[arm], EnergyJoules: 10, EnergySource: EnergyNVML})
		}
	}
	return ts
}

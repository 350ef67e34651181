package findings

import (
	"fmt"
	"strings"

	"rig/analysis"
	"rig/studies"
)

// Design maps a frozen design onto what the analysis reads. Its seed is
// drawn from the design's hash (analysis.SeedForDesign), so the same design
// always resamples the same way and two designs never share streams. Every
// clause of the design's decision rule becomes analysis clauses carrying its
// number and condition, so the trace shows the rule as written: a condition
// about "the challenger" becomes one clause per named pair, and
// "underpowered" and "p_best_below_bar" become checks the analysis judges on
// its own figures (power, P(best)).
func Design(d *studies.Design, designHash string) analysis.Design {
	ad := analysis.Design{Hash: designHash, Alpha: d.DecisionRule.Alpha, PBestBar: d.PBestBar, Resamples: analysis.MinResamples,
		PermutationResamples: 20000, Seed: analysis.SeedForDesign(designHash), Interval: analysis.BCa, Level: 0.95, CostMeasure: analysis.CostWall, CostFactor: 2}
	if ad.Alpha == 0 {
		ad.Alpha = 0.05
	}
	if ad.PBestBar == 0 {
		ad.PBestBar = 0.8
	}
	for _, a := range d.Arms {
		ad.Arms = append(ad.Arms, analysis.Arm{Name: a.Name})
		if a.Role == studies.RoleIncumbent && ad.Incumbent == "" {
			ad.Incumbent = a.Name
		}
	}
	for _, jk := range d.JobKinds {
		m, rankBy := analysis.MeasurePass, ""
		switch jk.RankingMeasure.Name {
		case "pass_rate":
		case studies.FidelityRankingMeasure:
			// Its pairs are judged on fidelity (Evidence.Fidelity); the
			// trials still give each arm's pass rate, shown beside.
			rankBy = analysis.MetricFidelityKL
		default:
			m = analysis.MeasureScore
		}
		ad.JobKinds = append(ad.JobKinds, analysis.JobKind{Name: jk.Name, Measure: m, Gate: 0.5, RankBy: rankBy})
	}
	seen := map[analysis.Pair]bool{}
	for _, p := range d.ResolvedPairs() {
		pair := analysis.Pair{Candidate: p.Challenger, Baseline: p.Incumbent}
		if !seen[pair] {
			seen[pair] = true
			ad.Pairs = append(ad.Pairs, pair)
		}
	}
	if d.Power.PilotDiscordance > 0 {
		ad.Power = &analysis.PowerPlan{PilotDiscordance: d.Power.PilotDiscordance, Tasks: d.Power.TaskCount, Power: d.Power.Power,
			SmallestDifference: d.Power.SmallestDetectableDifference}
	}
	for _, c := range d.DecisionRule.Clauses {
		if c.MaxCostRatio > 0 && c.When == "challenger_costs_more" {
			ad.CostFactor = c.MaxCostRatio
		}
	}
	for i, c := range d.DecisionRule.Clauses {
		var outs []analysis.Outcome
		switch c.When {
		default:
			// Registration refuses other conditions; passing one on makes the
			// analysis refuse it by name rather than drop it from the trace.
			fallthrough
		case studies.WhenUnderpowered, studies.WhenPBestBelowBar:
			ad.Rule.Clauses = append(ad.Rule.Clauses, analysis.Clause{Check: c.When, Then: c.Assign, Number: i + 1, When: c.When})
			continue
		case studies.WhenChallengerBetter:
			outs = []analysis.Outcome{analysis.Improvement}
		case studies.WhenChallengerCostMore:
			outs = []analysis.Outcome{analysis.Tradeoff}
		case studies.WhenChallengerWorse:
			outs = []analysis.Outcome{analysis.Regression}
		case studies.WhenNotShown:
			outs = []analysis.Outcome{analysis.Inconclusive, analysis.Tie}
		}
		for _, p := range ad.Pairs {
			then := c.Assign
			if strings.Contains(then, "challenger") {
				then = "accept " + p.Candidate
			}
			ad.Rule.Clauses = append(ad.Rule.Clauses, analysis.Clause{If: []analysis.Condition{{Outcomes: outs, Candidate: p.Candidate, Baseline: p.Baseline}},
				Then: then, Number: i + 1, When: c.When})
		}
	}
	ad.Rule.Default = d.DecisionRule.Otherwise
	for _, g := range d.Guardrails {
		ad.Guardrails = append(ad.Guardrails, analysis.Guardrail{Metric: g.Metric, HigherIsBetter: g.Direction == "higher",
			MaxRelative: g.MaxRelativeIncrease, MaxAbsolute: g.MaxAbsoluteIncrease})
	}
	if w := d.WinnerPolicy; w != nil {
		ad.Policy = &analysis.WinnerPolicy{MinPassRateDelta: w.MinPassRateDelta, MaxCostIncrease: w.MaxCostIncrease,
			MaxP95LatencyIncrease: w.MaxP95LatencyIncrease, AllowRegressions: w.AllowRegressions, AllowIncomparableJudges: w.AllowIncomparableJudges}
	}
	return ad
}

// receiptMetrics are the receipt fields the design's guardrails name
// ("receipt.FIELD").
func receiptMetrics(d *studies.Design) []string {
	var out []string
	for _, g := range d.Guardrails {
		if f, ok := strings.CutPrefix(g.Metric, studies.ReceiptMetricPrefix); ok {
			out = append(out, f)
		}
	}
	return out
}

// judgeIDs gives every arm of a judged job kind its judge's identity (arm,
// grader version and model digest), so the analysis calls two arms graded
// by different judges not comparable.
func judgeIDs(ad *analysis.Design, d *studies.Design, snap *studies.Snapshot) {
	for _, jk := range d.JobKinds {
		if jk.Grader.Name != studies.JudgeGrader {
			continue
		}
		id := fmt.Sprintf("%s@v%d", studies.JudgeName(jk.Judge), studies.JudgeGraderVersion)
		if fa, ok := snap.Arm(jk.Judge); ok {
			id += "/" + shortHash(fa.ModelSHA256)
		}
		for i := range ad.Arms {
			if a := d.Arm(ad.Arms[i].Name); a != nil && a.Role != studies.RoleJudge && a.RunsJobKind(jk.Name) {
				ad.Arms[i].JudgeID = id
			}
		}
	}
}

// shortHash is the first 12 hex digits of a digest, as the report prints
// model digests and judge identities.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

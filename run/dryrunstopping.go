package run

import (
	"context"
	"fmt"
	"math"
	"time"

	"rig/analysis"
	"rig/studies"
)

// StoppingStudies is how many studies the dry run simulates per scenario.
const StoppingStudies = analysis.PromiseStudies

// PriceStopping prices a design's stopping rule on the plan the dry run
// priced (e, from studies.DryRun): the expected trials and wall time under
// the stated difference, under no difference, and with arms that agree on
// every task, by analysis.StoppingPromise on the plan's own shape; nil
// when the design has no rule, or no pair to monitor with a planned task.
// The simulation runs the monitor's statistics, which studies does not
// import, so the daemon calls it where it assembles the dry run and puts
// the result in e.Stopping.
func PriceStopping(ctx context.Context, d *studies.Design, p *studies.Plan, e *studies.Estimate) (*studies.StoppingPrice, error) {
	rule := StoppingRule(d)
	pairs := d.ResolvedPairs()
	if rule == nil || len(pairs) == 0 {
		return nil, nil
	}
	// Planned paired tasks per pair: the tasks of its job kind in the plan.
	tasks := map[string]map[string]bool{}
	for _, t := range p.Trials {
		if tasks[t.Key.JobKind] == nil {
			tasks[t.Key.JobKind] = map[string]bool{}
		}
		tasks[t.Key.JobKind][t.Key.Task] = true
	}
	n := 0
	for _, pr := range pairs {
		n = max(n, len(tasks[pr.JobKind]))
	}
	if n == 0 {
		return nil, nil
	}
	block := p.BatchSize
	if block == 0 {
		block = studies.DefaultBatchSize
	}
	shape := analysis.PromiseShape{Pairs: len(pairs), Tasks: n, Block: block, Lead: d.Power.SmallestDetectableDifference, Discordance: d.Power.PilotDiscordance}
	pr, err := analysis.StoppingPromise(ctx, *rule, shape, 1)
	if err != nil {
		return nil, fmt.Errorf("pricing the stopping rule: %w", err)
	}
	sp := &studies.StoppingPrice{MaxTrials: e.Trials, MaxWallTime: e.WallTime, Model: pr.Model}
	for _, row := range pr.Rows {
		res := row.Result
		share := res.Tasks / float64(n)
		sc := studies.StoppingScenario{Name: row.Name, Lead: row.Sim.Lead, Share: share, Stopped: res.Stopped,
			Trials: math.Round(float64(e.Trials) * share), WallTime: time.Duration(float64(e.WallTime) * share).Round(time.Second)}
		if row.Sim.Lead != 0 {
			sc.Power = res.Power
		}
		sp.Scenarios = append(sp.Scenarios, sc)
	}
	return sp, nil
}

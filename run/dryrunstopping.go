package run

import (
	"context"
	"fmt"
	"math"
	"time"

	"rig/analysis"
	"rig/studies"
)

// StoppingStudies is how many studies the dry run simulates per scenario:
// enough for the mean share to about ±1 point, quick on one core.
const StoppingStudies = 2000

// PriceStopping prices a design's stopping rule on the plan the dry run
// priced (e, from studies.DryRun): the expected trials and wall time under
// the stated difference and under no difference, by analysis's
// SimulateStopping on the plan's own shape; nil when the design has no
// rule, or no pair to monitor with a planned task. The simulation runs the
// monitor's statistics, which studies does not import, so the daemon calls
// it where it assembles the dry run and puts the result in e.Stopping.
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
	sim := analysis.StoppingSim{Stopping: *rule, Arms: len(pairs) + 1, Tasks: n, Block: block, Studies: StoppingStudies, Seed: 1}
	lead, psi := d.Power.SmallestDetectableDifference, d.Power.PilotDiscordance
	model := fmt.Sprintf("%d monitored pair(s) on %d paired tasks, a check every %d tasks, %d simulated studies per row; pass/fail tasks of uniform difficulty", len(pairs), n, block, StoppingStudies)
	if len(pairs) == 1 && psi > 0 && lead <= psi {
		sim.Discordance = psi
		model = fmt.Sprintf("1 monitored pair on %d paired tasks, a check every %d tasks, %d simulated studies per row; the pilot's discordance %.2f", n, block, StoppingStudies, psi)
	}
	sp := &studies.StoppingPrice{MaxTrials: e.Trials, MaxWallTime: e.WallTime, Model: model}
	type truth struct {
		name string
		lead float64
	}
	truths := []truth{{"no difference", 0}}
	if lead > 0 {
		truths = append([]truth{{fmt.Sprintf("the stated difference (%.2f)", lead), lead}}, truths...)
	}
	for _, tr := range truths {
		sim.Lead = tr.lead
		res, err := analysis.SimulateStopping(ctx, sim)
		if err != nil {
			return nil, fmt.Errorf("pricing the stopping rule: %w", err)
		}
		share := res.Tasks / float64(n)
		sc := studies.StoppingScenario{Name: tr.name, Lead: tr.lead, Share: share, Stopped: res.Stopped,
			Trials: math.Round(float64(e.Trials) * share), WallTime: time.Duration(float64(e.WallTime) * share).Round(time.Second)}
		if tr.lead != 0 {
			sc.Power = res.Power
		}
		sp.Scenarios = append(sp.Scenarios, sc)
	}
	return sp, nil
}

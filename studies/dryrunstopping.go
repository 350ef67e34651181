package studies

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"rig/analysis"
)

// StoppingPrice is a dry run's price of a design with a stopping rule:
// the expected trials and wall time under the stated difference and under
// no difference (by SimulateStopping on the plan's own shape), beside the
// maximum, the whole plan, which a study that never settles runs.
type StoppingPrice struct {
	Scenarios []StoppingScenario `json:"scenarios"`
	// MaxTrials and MaxWallTime are the whole plan's.
	MaxTrials   int           `json:"max_trials"`
	MaxWallTime time.Duration `json:"max_wall_time"`
	// Model says what was simulated, in words.
	Model string `json:"model"`
}

// StoppingScenario is one simulated truth.
type StoppingScenario struct {
	Name string `json:"name"`
	// Lead is the first challenger's true lead (share of tasks).
	Lead float64 `json:"lead"`
	// Share is the mean share of each pair's planned paired tasks run;
	// Stopped the share of simulated studies that stopped early.
	Share    float64       `json:"share"`
	Stopped  float64       `json:"stopped"`
	Trials   float64       `json:"trials"`
	WallTime time.Duration `json:"wall_time"`
	// Power is the share with the challenger Holm-significant its way.
	Power float64 `json:"power,omitempty"`
}

// StoppingStudies is how many studies the dry run simulates per scenario:
// enough for the mean share to about ±1 point, quick on one core.
const StoppingStudies = 2000

// priceStopping prices a design's stopping rule on the plan; nil when the
// design has none.
func priceStopping(ctx context.Context, d *Design, p *Plan, e *Estimate) (*StoppingPrice, error) {
	rule := d.StoppingRule()
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
		block = DefaultBatchSize
	}
	sim := analysis.StoppingSim{Stopping: *rule, Arms: len(pairs) + 1, Tasks: n, Block: block, Studies: StoppingStudies, Seed: 1}
	lead, psi := d.Power.SmallestDetectableDifference, d.Power.PilotDiscordance
	model := fmt.Sprintf("%d monitored pair(s) on %d paired tasks, a check every %d tasks, %d simulated studies per row; pass/fail tasks of uniform difficulty", len(pairs), n, block, StoppingStudies)
	if len(pairs) == 1 && psi > 0 && lead <= psi {
		sim.Discordance = psi
		model = fmt.Sprintf("1 monitored pair on %d paired tasks, a check every %d tasks, %d simulated studies per row; the pilot's discordance %.2f", n, block, StoppingStudies, psi)
	}
	sp := &StoppingPrice{MaxTrials: e.Trials, MaxWallTime: e.WallTime, Model: model}
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
		sc := StoppingScenario{Name: tr.name, Lead: tr.lead, Share: share, Stopped: res.Stopped,
			Trials: math.Round(float64(e.Trials) * share), WallTime: time.Duration(float64(e.WallTime) * share).Round(time.Second)}
		if tr.lead != 0 {
			sc.Power = res.Power
		}
		sp.Scenarios = append(sp.Scenarios, sc)
	}
	return sp, nil
}

// write prints the stopping rule's price under the main table.
func (sp *StoppingPrice) write(w io.Writer) {
	if sp == nil {
		return
	}
	fmt.Fprintf(w, "with the stopping rule (%s):\n", sp.Model)
	for _, s := range sp.Scenarios {
		fmt.Fprintf(w, "  under %s: expected %.0f of %d trials (%.0f%%), wall time %s; stops early in %.0f%% of studies",
			s.Name, s.Trials, sp.MaxTrials, 100*s.Share, s.WallTime, 100*s.Stopped)
		if s.Power > 0 {
			fmt.Fprintf(w, ", power %.0f%%", 100*s.Power)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  at most: %d trials, wall time %s (a study that never settles runs the whole plan)\n", sp.MaxTrials, sp.MaxWallTime.Round(time.Second))
}

package analysis

import (
	"context"
	"fmt"
)

// PromiseStudies is how many studies the dry run simulates per truth:
// enough for a share to about ±1 point, quick on one core.
const PromiseStudies = 2000

// PromiseShape is a plan's shape as the dry run prices its stopping rule
// on it: every monitored pair against one incumbent on Tasks paired
// pass/fail tasks, a check after every Block tasks.
type PromiseShape struct {
	Pairs, Tasks, Block int
	// Lead is the power plan's stated difference (0: none stated) and
	// Discordance its pilot discordance (0: none).
	Lead, Discordance float64
}

// PromiseRow is one simulated truth of a promise: the setting and what it
// measured.
type PromiseRow struct {
	Name   string
	Sim    StoppingSim
	Result StoppingSimResult
}

// Promise is what the dry run says a stopping rule will do on a plan:
// under the stated difference (when one is stated), under no difference,
// and when the arms agree on every task, each by SimulateStopping, the
// monitor itself, so a study stops in the simulation exactly when the
// runner's Monitor would stop it.
type Promise struct {
	// Model says what was simulated, in words.
	Model string
	Rows  []PromiseRow
}

// StoppingPromise simulates the rule on the shape. One pair with a pilot
// discordance at least the lead draws each task discordant with that
// chance; otherwise every arm passes independently at a difficulty drawn
// per task (the challenger at it plus the lead). Arms that agree on every
// task settle the same way in every study, so one study is exact there.
func StoppingPromise(ctx context.Context, rule Stopping, sh PromiseShape, seed uint64) (Promise, error) {
	sim := StoppingSim{Stopping: rule, Arms: sh.Pairs + 1, Tasks: sh.Tasks, Block: sh.Block, Studies: PromiseStudies, Seed: seed}
	if sim.Block == 0 {
		sim.Block = DefaultBlock
	}
	model := fmt.Sprintf("%d monitored pair(s) on %d paired tasks, a check every %d tasks, %d simulated studies per row (one where the arms agree); pass/fail tasks of uniform difficulty", sh.Pairs, sh.Tasks, sim.Block, PromiseStudies)
	if sh.Pairs == 1 && sh.Discordance > 0 && sh.Lead <= sh.Discordance {
		sim.Discordance = sh.Discordance
		model = fmt.Sprintf("1 monitored pair on %d paired tasks, a check every %d tasks, %d simulated studies per row (one where the arms agree); the pilot's discordance %.2f", sh.Tasks, sim.Block, PromiseStudies, sh.Discordance)
	}
	var rows []PromiseRow
	if sh.Lead > 0 {
		s := sim
		s.Lead = sh.Lead
		rows = append(rows, PromiseRow{Name: fmt.Sprintf("the stated difference (%.2f)", sh.Lead), Sim: s})
	}
	agree := sim
	agree.Agree, agree.Discordance, agree.Studies = true, 0, 1
	rows = append(rows, PromiseRow{Name: "no difference", Sim: sim}, PromiseRow{Name: "no difference, the arms agreeing on every task", Sim: agree})
	for i := range rows {
		res, err := SimulateStopping(ctx, rows[i].Sim)
		if err != nil {
			return Promise{}, err
		}
		rows[i].Result = res
	}
	return Promise{Model: model, Rows: rows}, nil
}

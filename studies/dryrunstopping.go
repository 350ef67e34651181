package studies

import (
	"fmt"
	"io"
	"time"
)

// StoppingPrice is a dry run's price of a design with a stopping rule:
// the expected trials and wall time under the stated difference, under no
// difference, and with arms that agree on every task (which futility
// settles on the whole paired sample), beside the maximum, the whole plan,
// which a study that never settles runs. The expectation is analysis's simulation on the
// plan's own shape, so run.PriceStopping fills it in, where the dry run is
// assembled; studies only carries it in the Estimate and prints it.
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

package stats

import (
	"context"
	"fmt"
	"io"
	"math"

	"rig/analysis"
)

// Goals of early stopping, as StoppingGoals checks them.
const (
	GoalNull     = "null"     // any Holm-significant monitored pair, and any winner, ≤ 5%
	GoalSavings  = "savings"  // ≥ 30% fewer trials than the fixed design at ±20 points
	GoalPower    = "power"    // at most 3 points below the fixed design's power
	GoalFutility = "futility" // a challenger that cannot reach the difference stops ≥ 25% earlier
)

// StoppingGoal is one goal measured in one simulated setting.
type StoppingGoal struct {
	Setting string  `json:"setting"`
	Goal    string  `json:"goal"`
	Got     float64 `json:"got"`
	// Fixed is the fixed design's figure on the same draws (its power, or
	// its trials: the whole plan).
	Fixed  float64 `json:"fixed"`
	Want   string  `json:"want"`
	Pass   bool    `json:"pass"`
	Detail string  `json:"detail"`
	// Sim is the whole simulated result the goal was read from.
	Sim analysis.StoppingSimResult `json:"sim"`
}

// StoppingGoals simulates the rule in the settings, each with
// studies studies and a check after every block of analysis.DefaultBlock tasks:
// under no difference 8 identical arms on 60 tasks (a difficulty per task)
// and 2 arms on 100 tasks (discordance 0.3, the example design's pilot);
// a challenger 20 points ahead and 20 behind on 100 tasks. The futility
// goal is read from the 2-arm null (no difference cannot reach the rule's
// stated one). The rule's Alpha, Futility and Discordance are used as given.
func StoppingGoals(ctx context.Context, s analysis.Stopping, studies int, seed uint64) ([]StoppingGoal, error) {
	type setting struct {
		name string
		sim  analysis.StoppingSim
	}
	settings := []setting{
		{"no difference, 8 arms, 60 tasks", analysis.StoppingSim{Arms: 8, Tasks: 60}},
		{"no difference, 2 arms, 100 tasks", analysis.StoppingSim{Arms: 2, Tasks: 100, Discordance: 0.3}},
		{"challenger +20 points, 100 tasks", analysis.StoppingSim{Arms: 2, Tasks: 100, Discordance: 0.3, Lead: 0.2}},
		{"challenger -20 points, 100 tasks", analysis.StoppingSim{Arms: 2, Tasks: 100, Discordance: 0.3, Lead: -0.2}},
	}
	var out []StoppingGoal
	for i, st := range settings {
		sim := st.sim
		sim.Stopping, sim.Studies, sim.Seed = s, studies, seed+uint64(i)
		r, err := analysis.SimulateStopping(ctx, sim)
		if err != nil {
			return out, err
		}
		n := float64(sim.Tasks)
		add := func(goal string, got, fixed float64, want string, pass bool, detail string) {
			out = append(out, StoppingGoal{Setting: st.name, Goal: goal, Got: got, Fixed: fixed, Want: want, Pass: pass, Detail: detail, Sim: r})
		}
		if sim.Lead == 0 {
			worst := math.Max(r.AnyHolm, r.Winner)
			add(GoalNull, worst, math.Max(r.FixedAnyHolm, r.FixedWinner), "≤ 0.05", worst <= 0.05,
				fmt.Sprintf("any Holm-significant pair %.3f, any winner %.3f (fixed design %.3f, %.3f)", r.AnyHolm, r.Winner, r.FixedAnyHolm, r.FixedWinner))
			if sim.Arms == 2 && s.Futility > 0 {
				add(GoalFutility, r.Tasks/n, 1, "≤ 0.75", r.Tasks/n <= 0.75,
					fmt.Sprintf("mean %.1f of %d tasks (%.0f%% stopped as futile)", r.Tasks, sim.Tasks, 100*r.Futile))
			}
			continue
		}
		add(GoalSavings, r.Tasks/n, 1, "≤ 0.70", r.Tasks/n <= 0.70, fmt.Sprintf("mean %.1f of %d tasks", r.Tasks, sim.Tasks))
		add(GoalPower, r.Power, r.FixedPower, fmt.Sprintf("≥ %.3f", r.FixedPower-0.03), r.Power >= r.FixedPower-0.03,
			fmt.Sprintf("power %.3f, fixed design %.3f", r.Power, r.FixedPower))
	}
	return out, nil
}

// BenchStopping runs StoppingGoals for the group-sequential rule
// (O'Brien–Fleming and Pocock) and the anytime one, with futility at a
// 20-point difference, and prints a Markdown table beside the fixed
// design's figures. pass is false when a group-sequential goal is missed;
// the anytime rule's power is printed against the goal but, by design of
// an anytime-valid test, not held to it.
func BenchStopping(ctx context.Context, w io.Writer, studies int, seed uint64) (pass bool, err error) {
	if studies == 0 {
		studies = 4000
	}
	pass = true
	if _, err := fmt.Fprintf(w, "rig bench stats --stopping (seed %d, %d studies per setting, a look after every %d-task block)\n\n| rule | setting | goal | got | fixed design | want | |\n|---|---|---|---|---|---|---|\n", seed, studies, analysis.DefaultBlock); err != nil {
		return false, err
	}
	for _, s := range []analysis.Stopping{
		{Method: analysis.GroupSequential, Spending: analysis.OBrienFleming, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
		{Method: analysis.GroupSequential, Spending: analysis.Pocock, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
		{Method: analysis.Anytime, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
	} {
		rows, err := StoppingGoals(ctx, s, studies, seed)
		if err != nil {
			return false, err
		}
		name := string(s.Method)
		if s.Spending != "" {
			name += ", " + string(s.Spending)
		}
		for _, r := range rows {
			mark := "ok"
			switch {
			case !r.Pass && s.Method == analysis.Anytime && r.Goal == GoalPower:
				mark = "missed (anytime)"
			case !r.Pass:
				mark, pass = "FAIL", false
			}
			if _, err := fmt.Fprintf(w, "| %s | %s | %s | %.3f | %.3f | %s | %s — %s |\n", name, r.Setting, r.Goal, r.Got, r.Fixed, r.Want, mark, r.Detail); err != nil {
				return false, err
			}
		}
	}
	if err := BenchPowerLoss(ctx, w, studies, seed); err != nil {
		return false, err
	}
	ok, err := BenchPromise(ctx, w, analysis.PromiseStudies/4, seed)
	if err != nil {
		return false, err
	}
	pass = pass && ok
	verdict := "PASS"
	if !pass {
		verdict = "FAIL"
	}
	_, err = fmt.Fprintln(w, "\n"+verdict)
	return pass, err
}

// PowerLossRow is one rule's power beside the fixed design's on the same
// draws, in the setting of an independent measurement of the anytime
// rule's price.
type PowerLossRow struct {
	Rule  string  `json:"rule"`
	Lead  float64 `json:"lead"`
	Power float64 `json:"power"`
	Fixed float64 `json:"fixed"`
	Tasks float64 `json:"tasks"`
}

// PowerLoss simulates one challenger against an incumbent on 100 tasks
// with a look after every 10, each task's difficulty drawn from
// Beta(0.5, 0.5) and each arm passing independently at it (the challenger
// at it plus the lead): the anytime rule with its mixture centred on a
// stated 20-point difference at ψ = 0.3, the anytime rule with the uniform
// prior (no stated discordance), and O'Brien–Fleming for reference, at
// leads of 15 and 20 points; futility at 20 points throughout.
func PowerLoss(ctx context.Context, studies int, seed uint64) ([]PowerLossRow, error) {
	rules := []struct {
		name string
		s    analysis.Stopping
	}{
		{"anytime, centred prior (ψ 0.3)", analysis.Stopping{Method: analysis.Anytime, Alpha: 0.05, Futility: 0.2, Discordance: 0.3}},
		{"anytime, uniform prior", analysis.Stopping{Method: analysis.Anytime, Alpha: 0.05, Futility: 0.2}},
		{"group_sequential, obrien_fleming (ψ 0.3)", analysis.Stopping{Method: analysis.GroupSequential, Spending: analysis.OBrienFleming, Alpha: 0.05, Futility: 0.2, Discordance: 0.3}},
	}
	var out []PowerLossRow
	for _, lead := range []float64{0.15, 0.2} {
		for _, r := range rules {
			res, err := analysis.SimulateStopping(ctx, analysis.StoppingSim{Stopping: r.s, Arms: 2, Tasks: 100, Block: 10, Difficulty: 0.5, Lead: lead, Studies: studies, Seed: seed})
			if err != nil {
				return out, err
			}
			out = append(out, PowerLossRow{Rule: r.name, Lead: lead, Power: res.Power, Fixed: res.FixedPower, Tasks: res.Tasks})
		}
	}
	return out, nil
}

// BenchPowerLoss prints PowerLoss as a Markdown table.
func BenchPowerLoss(ctx context.Context, w io.Writer, studies int, seed uint64) error {
	rows, err := PowerLoss(ctx, studies, seed)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "\nPower against the fixed design: 1 challenger, 100 tasks, a look after every 10, difficulty from Beta(0.5, 0.5), futility at 20 points (seed %d, %d studies per row):\n\n| rule | lead | power | fixed design | loss (points) | mean tasks |\n|---|---|---|---|---|---|\n", seed, studies); err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "| %s | %.2f | %.3f | %.3f | %.1f | %.1f |\n", r.Rule, r.Lead, r.Power, r.Fixed, 100*(r.Fixed-r.Power), r.Tasks); err != nil {
			return err
		}
	}
	return nil
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"rig/api"
	"rig/internal/atomicfile"
	"rig/studies"
)

// MonthlyBudget caps what every study on this machine may spend in one
// calendar month (UTC), set by an operator. It lives in the daemon's home
// (budget.json); with none set, runs are not capped by month.
type MonthlyBudget = api.MonthlyBudget

// BudgetRequest is `rig budget set`.
type BudgetRequest = api.BudgetRequest

// MonthStatus is a month's cap, what the receipts of every study say was
// spent in it, and what is left.
type MonthStatus = api.MonthStatus

// ErrMonthlyBudget means a run would take the month past its cap: a
// conflict with what is left, until an operator raises the cap.
var ErrMonthlyBudget = api.ErrMonthlyBudget

func (bg Budget) budgetFile() string { return bg.s.layout().Budget() }

// SetMonthly puts a monthly cap in force; the operator role sets it.
func (bg Budget) SetMonthly(ctx context.Context, req BudgetRequest) (MonthlyBudget, error) {
	actor, err := bg.s.actor(ctx, req.Actor)
	if err != nil {
		return MonthlyBudget{}, err
	}
	d, err := time.ParseDuration(req.WallTime)
	switch {
	case err != nil || d <= 0 || d > 31*24*time.Hour:
		return MonthlyBudget{}, fmt.Errorf("%w: budget wall_time %q: write a positive duration up to 744h (a month), e.g. --wall 200h", ErrBadRequest, req.WallTime)
	case !(req.EnergyWh > 0 && req.EnergyWh <= 100*studies.MaxEnergyWh):
		return MonthlyBudget{}, fmt.Errorf("%w: budget energy_wh %v: give watt-hours above 0, e.g. --energy-wh 20000", ErrBadRequest, req.EnergyWh)
	}
	b := MonthlyBudget{WallTime: req.WallTime, EnergyWh: req.EnergyWh, SetBy: actor, SetAt: time.Now().UTC(), Why: req.Why}
	bg.s.budgetMu.Lock()
	defer bg.s.budgetMu.Unlock()
	// The file holds only the cap in force; the trail keeps every one set,
	// with the one it replaced, written before the cap takes effect.
	line := map[string]any{"at": b.SetAt, "wall_time": b.WallTime, "energy_wh": b.EnergyWh, "who": actor, "why": req.Why}
	var old MonthlyBudget
	if err := atomicfile.ReadJSON(bg.budgetFile(), &old); err == nil {
		line["replaced"] = old
	}
	if err := appendAuditLine(bg.s.Home, "budget", line); err != nil {
		return MonthlyBudget{}, err
	}
	return b, atomicfile.WriteJSON(bg.budgetFile(), b, 0o600)
}

// Month is the month of now: its cap and what every study's receipts
// (every attempt started in it, whatever its outcome) spent.
func (bg Budget) Month(ctx context.Context, now time.Time) (MonthStatus, error) {
	now = now.UTC()
	st := MonthStatus{Month: now.Format("2006-01")}
	var b MonthlyBudget
	switch err := atomicfile.ReadJSON(bg.budgetFile(), &b); {
	case err == nil:
		st.Cap = &b
	case !errors.Is(err, os.ErrNotExist):
		return st, fmt.Errorf("reading the monthly budget %s: %w (rig budget set rewrites it)", bg.budgetFile(), err)
	}
	names, err := bg.s.Studies().List()
	if err != nil {
		return st, err
	}
	for _, name := range names {
		store, err := bg.s.store(name)
		if err != nil {
			return st, err
		}
		execs, err := store.Executions(ctx)
		if err != nil {
			return st, err
		}
		for _, e := range execs {
			recs, err := store.Receipts(ctx, e.ID)
			if err != nil {
				return st, err
			}
			for _, r := range recs {
				if r.StartedAt.UTC().Format("2006-01") != st.Month {
					continue
				}
				sec := float64(r.WallMS) / 1000
				st.UsedSeconds += sec
				if r.EnergyJoules > 0 {
					st.UsedWh += r.EnergyJoules / 3600
				} else {
					st.UsedWh += sec * studies.EstimatedWatts / 3600
				}
			}
		}
	}
	if st.Cap != nil {
		capWall, _ := time.ParseDuration(st.Cap.WallTime)
		st.LeftSeconds = math.Max(0, capWall.Seconds()-st.UsedSeconds)
		st.LeftWh = math.Max(0, st.Cap.EnergyWh-st.UsedWh)
	}
	return st, nil
}

// checkMonth refuses a run needing more than the month has left.
func checkMonth(m MonthStatus, needSeconds, needWh float64, basis string) error {
	if m.Cap == nil {
		return nil
	}
	if needSeconds <= m.LeftSeconds && needWh <= m.LeftWh {
		return nil
	}
	return fmt.Errorf("%w: this run needs %s and %.1f Wh (%s) but %s; wait for next month or ask an operator to raise the cap (rig budget set)",
		ErrMonthlyBudget, time.Duration(needSeconds*float64(time.Second)).Round(time.Second), needWh, basis, m)
}

// check prices the study's plan as the dry run does and
// refuses a run the month cannot hold. A plan that cannot be priced (no
// measured speed) is held to its design's own budget, the most it may spend.
func (bg Budget) check(ctx context.Context, name string) error {
	m, err := bg.Month(ctx, time.Now())
	if err != nil || m.Cap == nil {
		return err
	}
	est, d, _, err := bg.s.price(ctx, name, "", io.Discard)
	if est != nil {
		return checkMonth(m, est.WallTime.Seconds(), est.EnergyWh, "the dry run's estimate")
	}
	if d == nil {
		return err
	}
	wall, _ := time.ParseDuration(d.Budget.WallTime)
	return checkMonth(m, wall.Seconds(), d.Budget.EnergyWh, "the design's budget, as the plan could not be priced")
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"rig/internal/atomicfile"
	"rig/studies"
)

// MonthlyBudget caps what every study on this machine may spend in one
// calendar month (UTC), set by an operator. It lives in the daemon's home
// (budget.json); with none set, runs are not capped by month.
type MonthlyBudget struct {
	WallTime string    `json:"wall_time"` // a Go duration, e.g. "200h"
	EnergyWh float64   `json:"energy_wh"`
	SetBy    string    `json:"set_by"`
	SetAt    time.Time `json:"set_at"`
	Why      string    `json:"why,omitempty"`
}

// BudgetRequest is `rig budget set`.
type BudgetRequest struct {
	WallTime string  `json:"wall_time"`
	EnergyWh float64 `json:"energy_wh"`
	Why      string  `json:"why"`
	Actor    string  `json:"actor,omitempty"`
}

// MonthStatus is a month's cap, what the receipts of every study say was
// spent in it, and what is left.
type MonthStatus struct {
	Month       string         `json:"month"` // "2026-05"
	Cap         *MonthlyBudget `json:"cap,omitempty"`
	UsedSeconds float64        `json:"used_seconds"`
	UsedWh      float64        `json:"used_wh"`
	LeftSeconds float64        `json:"left_seconds"`
	LeftWh      float64        `json:"left_wh"`
}

// ErrMonthlyBudget means a run would take the month past its cap: a
// conflict with what is left, until an operator raises the cap.
var ErrMonthlyBudget = errors.New("the month's budget is spent")

func (s *Service) budgetFile() string { return s.layout().Budget() }

// SetMonthlyBudget puts a monthly cap in force; the operator role sets it.
func (s *Service) SetMonthlyBudget(ctx context.Context, req BudgetRequest) (MonthlyBudget, error) {
	actor, err := s.actor(ctx, req.Actor)
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
	s.budgetMu.Lock()
	defer s.budgetMu.Unlock()
	// The file holds only the cap in force; the trail keeps every one set,
	// with the one it replaced, written before the cap takes effect.
	line := map[string]any{"at": b.SetAt, "wall_time": b.WallTime, "energy_wh": b.EnergyWh, "who": actor, "why": req.Why}
	var old MonthlyBudget
	if err := atomicfile.ReadJSON(s.budgetFile(), &old); err == nil {
		line["replaced"] = old
	}
	if err := appendAuditLine(s.Home, "budget", line); err != nil {
		return MonthlyBudget{}, err
	}
	return b, atomicfile.WriteJSON(s.budgetFile(), b, 0o600)
}

// MonthBudget is the month of now: its cap and what every study's receipts
// (every attempt started in it, whatever its outcome) spent.
func (s *Service) MonthBudget(ctx context.Context, now time.Time) (MonthStatus, error) {
	now = now.UTC()
	st := MonthStatus{Month: now.Format("2006-01")}
	var b MonthlyBudget
	switch err := atomicfile.ReadJSON(s.budgetFile(), &b); {
	case err == nil:
		st.Cap = &b
	case !errors.Is(err, os.ErrNotExist):
		return st, fmt.Errorf("reading the monthly budget %s: %w (rig budget set rewrites it)", s.budgetFile(), err)
	}
	names, err := s.List()
	if err != nil {
		return st, err
	}
	for _, name := range names {
		store, err := s.store(name)
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

// String is the month in one line, as the dry run prints it.
func (m MonthStatus) String() string {
	if m.Cap == nil {
		return fmt.Sprintf("month %s: no monthly budget set (an operator sets one: rig budget set); spent so far %s, %.1f Wh", m.Month, dur(m.UsedSeconds), m.UsedWh)
	}
	return fmt.Sprintf("month %s: budget %s and %.1f Wh (set by %s); spent %s and %.1f Wh; left %s and %.1f Wh",
		m.Month, m.Cap.WallTime, m.Cap.EnergyWh, m.Cap.SetBy, dur(m.UsedSeconds), m.UsedWh, dur(m.LeftSeconds), m.LeftWh)
}

func dur(sec float64) string {
	return time.Duration(sec * float64(time.Second)).Round(time.Second).String()
}

// checkMonth refuses a run needing more than the month has left.
func (m MonthStatus) checkMonth(needSeconds, needWh float64, basis string) error {
	if m.Cap == nil {
		return nil
	}
	if needSeconds <= m.LeftSeconds && needWh <= m.LeftWh {
		return nil
	}
	return fmt.Errorf("%w: this run needs %s and %.1f Wh (%s) but %s; wait for next month or ask an operator to raise the cap (rig budget set)",
		ErrMonthlyBudget, dur(needSeconds), needWh, basis, m)
}

// checkMonthlyBudget prices the study's plan as the dry run does and
// refuses a run the month cannot hold. A plan that cannot be priced (no
// measured speed) is held to its design's own budget, the most it may spend.
func (s *Service) checkMonthlyBudget(ctx context.Context, name string) error {
	m, err := s.MonthBudget(ctx, time.Now())
	if err != nil || m.Cap == nil {
		return err
	}
	est, d, _, err := s.price(ctx, name, "", io.Discard)
	if est != nil {
		return m.checkMonth(est.WallTime.Seconds(), est.EnergyWh, "the dry run's estimate")
	}
	if d == nil {
		return err
	}
	wall, _ := time.ParseDuration(d.Budget.WallTime)
	return m.checkMonth(wall.Seconds(), d.Budget.EnergyWh, "the design's budget, as the plan could not be priced")
}

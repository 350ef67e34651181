package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMonthlyBudget(t *testing.T) {
	s, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := s.MonthBudget(ctx, time.Date(2026, 5, 3, 0, 0, 0, 0, time.UTC))
	if err != nil || m.Cap != nil || m.Month != "2026-05" {
		t.Fatalf("no budget set: %+v, %v", m, err)
	}
	if err := m.checkMonth(1e9, 1e9, "test"); err != nil {
		t.Errorf("without a cap a run was refused: %v", err)
	}
	for _, bad := range []BudgetRequest{{WallTime: "forever", EnergyWh: 10}, {WallTime: "800h", EnergyWh: 10}, {WallTime: "10h", EnergyWh: 0}} {
		if _, err := s.SetMonthlyBudget(ctx, bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("budget %+v: %v, want ErrBadRequest", bad, err)
		}
	}
	if _, err := s.SetMonthlyBudget(ctx, BudgetRequest{WallTime: "10h", EnergyWh: 500, Why: "May's share"}); err != nil {
		t.Fatal(err)
	}
	m, err = s.MonthBudget(ctx, time.Now())
	if err != nil || m.Cap == nil || m.LeftSeconds != 36000 || m.LeftWh != 500 {
		t.Fatalf("after set: %+v, %v", m, err)
	}
	if err := m.checkMonth(9*3600, 400, "the dry run's estimate"); err != nil {
		t.Errorf("a run that fits was refused: %v", err)
	}
	err = m.checkMonth(11*3600, 400, "the dry run's estimate")
	if !errors.Is(err, ErrMonthlyBudget) || codeOf(err) != "monthly_budget" || !strings.Contains(err.Error(), "left 10h0m0s and 500.0 Wh") || !strings.Contains(err.Error(), "rig budget set") {
		t.Errorf("a run past the wall cap: %v, want ErrMonthlyBudget naming what is left and the fix", err)
	}
	if err := m.checkMonth(3600, 501, "x"); !errors.Is(err, ErrMonthlyBudget) {
		t.Errorf("a run past the energy cap: %v", err)
	}
	// Raising the cap lets the same run through.
	if _, err := s.SetMonthlyBudget(ctx, BudgetRequest{WallTime: "20h", EnergyWh: 500}); err != nil {
		t.Fatal(err)
	}
	if m, _ = s.MonthBudget(ctx, time.Now()); m.checkMonth(11*3600, 400, "x") != nil {
		t.Errorf("still refused after the cap was raised: %+v", m)
	}
}

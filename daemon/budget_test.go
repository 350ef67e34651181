package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/receipts"
)

func TestMonthlyBudget(t *testing.T) {
	s, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := s.Budget().Month(ctx, time.Date(2026, 5, 3, 0, 0, 0, 0, time.UTC))
	if err != nil || m.Cap != nil || m.Month != "2026-05" {
		t.Fatalf("no budget set: %+v, %v", m, err)
	}
	if err := checkMonth(m, 1e9, 1e9, "test"); err != nil {
		t.Errorf("without a cap a run was refused: %v", err)
	}
	for _, bad := range []BudgetRequest{{WallTime: "forever", EnergyWh: 10}, {WallTime: "800h", EnergyWh: 10}, {WallTime: "10h", EnergyWh: 0}} {
		if _, err := s.Budget().SetMonthly(ctx, bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("budget %+v: %v, want ErrBadRequest", bad, err)
		}
	}
	if _, err := s.Budget().SetMonthly(ctx, BudgetRequest{WallTime: "10h", EnergyWh: 500, Why: "May's share"}); err != nil {
		t.Fatal(err)
	}
	m, err = s.Budget().Month(ctx, time.Now())
	if err != nil || m.Cap == nil || m.LeftSeconds != 36000 || m.LeftWh != 500 {
		t.Fatalf("after set: %+v, %v", m, err)
	}
	if err := checkMonth(m, 9*3600, 400, "the dry run's estimate"); err != nil {
		t.Errorf("a run that fits was refused: %v", err)
	}
	err = checkMonth(m, 11*3600, 400, "the dry run's estimate")
	if !errors.Is(err, ErrMonthlyBudget) || codeOf(err) != "monthly_budget" || !strings.Contains(err.Error(), "left 10h0m0s and 500.0 Wh") || !strings.Contains(err.Error(), "rig budget set") {
		t.Errorf("a run past the wall cap: %v, want ErrMonthlyBudget naming what is left and the fix", err)
	}
	if err := checkMonth(m, 3600, 501, "x"); !errors.Is(err, ErrMonthlyBudget) {
		t.Errorf("a run past the energy cap: %v", err)
	}
	// Raising the cap lets the same run through.
	if _, err := s.Budget().SetMonthly(ctx, BudgetRequest{WallTime: "20h", EnergyWh: 500}); err != nil {
		t.Fatal(err)
	}
	if m, _ = s.Budget().Month(ctx, time.Now()); checkMonth(m, 11*3600, 400, "x") != nil {
		t.Errorf("still refused after the cap was raised: %+v", m)
	}
	// The trail keeps both caps set, the second with the one it replaced,
	// and none of the refused ones.
	type budgetLine struct {
		WallTime string         `json:"wall_time"`
		Who      string         `json:"who"`
		Replaced *MonthlyBudget `json:"replaced"`
	}
	trail := auditTrail[budgetLine](t, s.Home, "budget")
	if len(trail) != 2 || trail[0].WallTime != "10h" || trail[0].Replaced != nil || trail[1].WallTime != "20h" || trail[1].Replaced == nil || trail[1].Replaced.WallTime != "10h" || trail[0].Who == "" {
		t.Errorf("audits/budget.jsonl = %+v; want the 10h cap, then the 20h one replacing it", trail)
	}
}

// auditTrail reads Home/audits/NAME.jsonl, one T a line.
func auditTrail[T any](t *testing.T, home, name string) []T {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(home, "audits", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		var e T
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audits/%s.jsonl: %v", name, err)
		}
		out = append(out, e)
	}
	return out
}

// TestMonthlyBudgetCountsEveryStudysReceipts: the month's spending is the
// wall time and energy of every receipt started in it, in every study on
// the machine, whatever its outcome; a receipt of another month is not.
func TestMonthlyBudgetCountsEveryStudysReceipts(t *testing.T) {
	c := newCardStudy(t, "", nil)
	ctx := context.Background()
	now := time.Now().UTC()
	before, err := c.svc.Budget().Month(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := c.st.Receipts(ctx, "exec-1")
	if err != nil || len(recs) == 0 {
		t.Fatalf("no receipts to copy: %v", err)
	}
	add := func(attempt int, started time.Time, wallMS int64, joules float64, outcome receipts.Outcome) {
		r := recs[0]
		r.Attempt, r.ParentAttempt, r.Outcome, r.Grade = attempt, attempt-1, outcome, nil
		r.StartedAt, r.FinishedAt, r.WallMS, r.EnergyJoules = started, started.Add(time.Duration(wallMS)*time.Millisecond), wallMS, joules
		if err := c.st.PutReceipt(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	add(2, now, 3_600_000, 36_000, receipts.Preempted)                   // 1 h, 10 Wh: counts though preempted
	add(3, now.AddDate(0, -1, 0), 7_200_000, 72_000, receipts.Preempted) // last month: does not count
	after, err := c.svc.Budget().Month(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.UsedSeconds - before.UsedSeconds; d != 3600 {
		t.Errorf("the month's wall time grew by %v s, want 3600", d)
	}
	if d := after.UsedWh - before.UsedWh; d < 9.999 || d > 10.001 {
		t.Errorf("the month's energy grew by %v Wh, want 10", d)
	}
	// A cap of what was spent plus 30 minutes: an hour's run is refused,
	// naming what is left.
	capWall := time.Duration(after.UsedSeconds*float64(time.Second)) + 30*time.Minute
	if _, err := c.svc.Budget().SetMonthly(ctx, BudgetRequest{WallTime: capWall.Round(time.Second).String(), EnergyWh: after.UsedWh + 100}); err != nil {
		t.Fatal(err)
	}
	m, err := c.svc.Budget().Month(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if m.LeftSeconds < 1799 || m.LeftSeconds > 1801 {
		t.Errorf("left %v s, want 1800", m.LeftSeconds)
	}
	if err := checkMonth(m, 3600, 1, "the dry run's estimate"); !errors.Is(err, ErrMonthlyBudget) || !strings.Contains(err.Error(), "left 30m0s") {
		t.Errorf("an hour's run with 30 min left: %v", err)
	}
}

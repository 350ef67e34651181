package findings

import (
	"testing"
	"time"

	"rig/receipts"
)

// A receipt's slots, its request's start (its end less its wall time) and
// its tokens reach the analysis, which charges trials that shared a
// runtime from them.
func TestTrialsPlaceReceiptsInTime(t *testing.T) {
	end := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	r := receipts.Receipt{Arm: "a", JobKind: "k", TaskID: "t", Repeat: 1, Attempt: 1, Outcome: receipts.Scored,
		Pins: map[string]string{"slots": "4"}, WallMS: 2500, FinishedAt: end,
		InputTokens: 100, ThinkingTokens: 5, OutputTokens: 20, Grade: &receipts.Grade{Score: 1, Pass: true}}
	ts := Trials([]receipts.Receipt{r}, nil, "h")
	if len(ts) != 1 {
		t.Fatalf("%d trials, want 1", len(ts))
	}
	got := ts[0]
	if got.Slots != 4 || got.StartMS != end.UnixMilli()-2500 || got.Tokens != 125 || got.OutputTokens != 25 {
		t.Errorf("trial slots %d, start %d, tokens %d, output %d; want 4, %d, 125, 25", got.Slots, got.StartMS, got.Tokens, got.OutputTokens, end.UnixMilli()-2500)
	}
}

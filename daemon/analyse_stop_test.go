package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"rig/receipts"
	"rig/report/findings"
	"rig/studies"
)

// stoppedStore is a store with no receipts whose execution has the early-
// stopping record raw.
type stoppedStore struct{ raw json.RawMessage }

func (stoppedStore) Receipts(context.Context, string) ([]receipts.Receipt, error) { return nil, nil }
func (stoppedStore) Grades(context.Context, string) ([]receipts.GradeRecord, error) {
	return nil, nil
}
func (stoppedStore) Preflight(context.Context, string, string) (json.RawMessage, error) {
	return nil, nil
}
func (s stoppedStore) Stop(context.Context, string) (json.RawMessage, bool, error) {
	return s.raw, true, nil
}

// An early-stopping record stored before the analysis's JSON moved to
// snake_case reads in full, as one stored since does.
func TestReadStoreReadsAStopRecordInEitherSpelling(t *testing.T) {
	legacy, err := os.ReadFile(filepath.Join("..", "analysis", "testdata", "stop_legacy.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := &studies.Design{Stopping: &studies.Stopping{Method: "group_sequential", Alpha: 0.05}}
	read := func(raw json.RawMessage) *findings.Evidence {
		t.Helper()
		ev := &findings.Evidence{Study: "s", Execution: "exec-1", Design: d}
		if err := readStore(context.Background(), stoppedStore{raw}, ev); err != nil {
			t.Fatal(err)
		}
		if ev.Sequential == nil {
			t.Fatal("no stopping record read")
		}
		return ev
	}
	old := read(legacy).Sequential
	if len(old.Look.Pairs) != 2 || old.Look.Pairs[0].JobKind != "apply" || old.Look.Pairs[0].CandidateOnly != 36 || len(old.Look.HolmP) != 2 || len(old.NotRun) != 2 {
		t.Fatalf("the legacy record read as %+v", old)
	}
	now, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	cur := read(now).Sequential
	again, err := json.Marshal(cur)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(now) {
		t.Errorf("the record stored now reads differently:\n%s\n%s", now, again)
	}
}

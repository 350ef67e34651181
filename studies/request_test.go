package studies

import (
	"errors"
	"strings"
	"testing"
)

func TestReplay(t *testing.T) {
	first := Request{Op: OpRun, Key: "demo-a1", Body: RunBody{Study: "demo", SnapshotHash: "abc"}}
	rec, err := first.Record("demo-a1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		prev       *RequestRecord
		req        Request
		wantResult string
		wantReplay bool
		wantErr    error
	}{
		{name: "new key", prev: nil, req: first},
		{name: "same key same body", prev: &rec, req: first, wantResult: "demo-a1", wantReplay: true},
		{name: "same body rebuilt", prev: &rec, req: Request{Op: OpRun, Key: "demo-a1", Body: map[string]any{"snapshot_hash": "abc", "study": "demo"}}, wantResult: "demo-a1", wantReplay: true},
		{name: "same key other body", prev: &rec, req: Request{Op: OpRun, Key: "demo-a1", Body: RunBody{Study: "demo", SnapshotHash: "abd"}}, wantErr: ErrIdempotencyConflict},
		{name: "same key other op", prev: &rec, req: Request{Op: OpDecide, Key: "demo-a1", Body: RunBody{Study: "demo", SnapshotHash: "abc"}}, wantErr: ErrIdempotencyConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, replay, err := Replay(tc.prev, tc.req)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if res != tc.wantResult || replay != tc.wantReplay {
				t.Errorf("Replay = %q, %v; want %q, %v", res, replay, tc.wantResult, tc.wantReplay)
			}
			if err != nil && !strings.Contains(err.Error(), `"demo-a1"`) {
				t.Errorf("conflict %q does not name the key", err)
			}
		})
	}
}

func TestRequestNeedsKey(t *testing.T) {
	for _, r := range []Request{{Op: OpCreate, Body: 1}, {Op: "delete", Key: "k"}} {
		if _, _, err := Replay(nil, r); err == nil {
			t.Errorf("Replay(%+v) accepted", r)
		}
		if _, err := r.Record("x"); err == nil {
			t.Errorf("Record(%+v) accepted", r)
		}
	}
}

func TestCheckNewName(t *testing.T) {
	registered := map[string]bool{"demo-small-models": true}
	exists := func(n string) bool { return registered[n] }
	if err := CheckNewName("design.json", "fresh-study", exists); err != nil {
		t.Errorf("new name refused: %v", err)
	}
	err := CheckNewName("design.json", "demo-small-models", exists)
	if !errors.Is(err, ErrNameTaken) || !strings.Contains(err.Error(), "design.json: name:") {
		t.Errorf("second register = %v, want ErrNameTaken naming file and field", err)
	}
}

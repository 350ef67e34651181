package receipts

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testHash = "3f1c0ffee0000000000000000000000000000000000000000000000000000abc"

func genSHA(c byte) string { return strings.Repeat(string(c), 64) }

// openFrozen returns a store of study "s1", frozen under testHash, with
// execution "e1".
func openFrozen(t *testing.T) (*Store, string) {
	t.Helper()
	return openFrozenAt(t, filepath.Join(t.TempDir(), "s1.db"))
}

func openFrozenAt(t testing.TB, path string) (*Store, string) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(path, "s1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Transition(ctx, Transition{From: "", To: "approved", Who: "director", Why: "read the three sentences"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Freeze(ctx, testHash, Transition{From: "approved", To: "frozen", Who: "alice", Why: "freeze"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutExecution(ctx, Execution{ID: "e1", Attempt: 1, Status: Planned, PlanSeed: 42, DesignHash: testHash}); err != nil {
		t.Fatal(err)
	}
	return s, path
}

func sample(arm, task string, repeat, attempt int, out Outcome) Receipt {
	r := Receipt{
		StudyID: "s1", ExecutionID: "e1", DesignHash: testHash,
		Arm: arm, JobKind: "extract-json", TaskID: task, Repeat: repeat, Attempt: attempt, Outcome: out,
		ModelName: "smollm2", ModelDigest: "sha256:" + genSHA('a'), Runtime: "llama-server",
		Harness: "rig-chat", HarnessVersion: "0.1.0",
		Pins:        map[string]string{"quant": "Q4_1", "context": "2048", "temperature": "0"},
		Effort:      Effort{RawParameter: "none", Value: "", Graded: false},
		InputTokens: 120, OutputTokens: 40, WallMS: 1500, PeakMemoryBytes: 300 << 20,
		Machine:   "cpu x86_64; llama.cpp 80fb11a",
		StartedAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.FixedZone("X", 3600)),
	}
	r.FinishedAt = r.StartedAt.Add(1500 * time.Millisecond)
	if attempt > 1 {
		r.ParentAttempt = attempt - 1
	}
	switch out {
	case Scored, Capped:
		r.Grade = &Grade{Score: 1, Pass: true, Grader: "exact-json", GraderVersion: "1"}
		r.GenerationSHA256 = genSHA('b')
	case FailedAtCard:
		r.Grade = &Grade{Score: 0, Pass: false, Grader: "budget", GraderVersion: "1"}
	}
	return r
}

func TestOpenNewAndReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "study.db")
	s, err := Open(path, "study-a")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Meta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.StudyID != "study-a" || m.SchemaVersion != SchemaVersion || m.Frozen || m.CreatedAt.IsZero() {
		t.Errorf("meta = %+v", m)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, "study-a")
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if s.StudyID() != "study-a" || s.Path() != path {
		t.Errorf("StudyID=%q Path=%q", s.StudyID(), s.Path())
	}
}

func TestOpenBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"", "a|b", "a\nb"} {
		if _, err := Open(filepath.Join(dir, "x.db"), id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%q): err = %v, want ErrInvalid", id, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "no", "such", "dir.db"), "s"); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Open(path, "s"); !errors.Is(err, ErrLocked) {
		t.Errorf("second Open: err = %v, want ErrLocked", err)
	}
}

func TestForeignStudyRefused(t *testing.T) {
	ctx := context.Background()
	s, path := openFrozen(t)
	if err := s.PutReceipt(ctx, sample("a", "t1", 0, 1, Scored)); err != nil {
		t.Fatal(err)
	}
	// A receipt of another study, through the owner's handle.
	other := sample("a", "t2", 0, 1, Scored)
	other.StudyID = "s2"
	err := s.PutReceipt(ctx, other)
	var fe *ForeignStudyError
	if !errors.As(err, &fe) || fe.Owner != "s1" || fe.Writer != "s2" || !fe.Frozen {
		t.Errorf("foreign receipt: err = %v", err)
	}
	s.Close()

	// Another study opening the frozen store: reads work, writes are refused.
	f, err := Open(path, "s2")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.StudyID() != "s1" {
		t.Errorf("StudyID = %q, want the owner s1", f.StudyID())
	}
	rs, err := f.Receipts(ctx, "")
	if err != nil || len(rs) != 1 {
		t.Errorf("foreign read: %d receipts, %v", len(rs), err)
	}
	r2 := sample("a", "t3", 0, 1, Scored)
	r2.StudyID = "s2"
	writes := map[string]error{
		"PutReceipt":   f.PutReceipt(ctx, r2),
		"PutExecution": f.PutExecution(ctx, Execution{ID: "e9", Attempt: 1, Status: Planned, DesignHash: testHash}),
		"Freeze":       f.Freeze(ctx, testHash, Transition{From: "frozen", To: "frozen", Who: "x", Why: "y"}),
		"Transition":   f.Transition(ctx, Transition{From: "frozen", To: "running", Who: "x", Why: "y"}),
		"PutPreflight": f.PutPreflight(ctx, "a", "24g", json.RawMessage(`{"fits":true}`)),
	}
	_, writes["AppendGovernorEvent"] = f.AppendGovernorEvent(ctx, GovernorEvent{Kind: "preempt"})
	_, _, writes["ClaimIdempotency"] = f.ClaimIdempotency(ctx, "k", []byte("req"), "rec")
	for name, err := range writes {
		if !errors.Is(err, ErrForeignStudy) {
			t.Errorf("%s from another study: err = %v, want ErrForeignStudy", name, err)
		}
	}
	if rs, _ := f.Receipts(ctx, ""); len(rs) != 1 {
		t.Errorf("after refused writes: %d receipts, want 1", len(rs))
	}
}

func TestFreeze(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutReceipt(ctx, sample("a", "t", 0, 1, Scored)); !errors.Is(err, ErrNotFrozen) {
		t.Errorf("receipt before freeze: err = %v, want ErrNotFrozen", err)
	}
	if err := s.Freeze(ctx, "", Transition{To: "frozen", Who: "a", Why: "b"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty hash: err = %v", err)
	}
	if err := s.Freeze(ctx, testHash, Transition{From: "approved", To: "frozen", Who: "a", Why: "b"}); !errors.Is(err, ErrStaleState) {
		t.Errorf("freeze from the wrong state: err = %v, want ErrStaleState", err)
	}
	if m, _ := s.Meta(ctx); m.Frozen {
		t.Fatal("a refused freeze froze the store")
	}
	tr := Transition{From: "", To: "frozen", Who: "alice", Why: "approved design"}
	if err := s.Freeze(ctx, testHash, tr); err != nil {
		t.Fatal(err)
	}
	if err := s.Freeze(ctx, testHash, tr); err != nil {
		t.Errorf("same hash again: %v", err)
	}
	if err := s.Freeze(ctx, genSHA('9'), tr); !errors.Is(err, ErrConflict) {
		t.Errorf("another hash: err = %v, want ErrConflict", err)
	}
	m, _ := s.Meta(ctx)
	if !m.Frozen || m.DesignHash != testHash || m.State != "frozen" {
		t.Errorf("meta = %+v", m)
	}
	audit, err := s.Audit(ctx)
	if err != nil || len(audit) != 1 {
		t.Fatalf("audit = %+v, %v; want one entry (the repeat freeze is not audited)", audit, err)
	}
	if a := audit[0]; a.Who != "alice" || a.From != "" || a.To != "frozen" || a.Subject != "s1" || a.At.IsZero() || a.Seq != 1 {
		t.Errorf("audit entry = %+v", a)
	}
}

func TestTransition(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	tests := []struct {
		tr      Transition
		wantErr error
	}{
		{Transition{From: "frozen", To: "running", Who: "daemon", Why: "run e1"}, nil},
		{Transition{From: "frozen", To: "running", Who: "daemon", Why: "again"}, ErrStaleState},
		{Transition{From: "running", To: "decided", Who: "", Why: "x"}, ErrInvalid},
		{Transition{From: "running", To: "decided", Who: "x", Why: " "}, ErrInvalid},
		{Transition{From: "running", To: "", Who: "x", Why: "y"}, ErrInvalid},
		{Transition{From: "running", To: "decided", Who: "director", Why: "rule clause 2"}, nil},
	}
	for i, tc := range tests {
		err := s.Transition(ctx, tc.tr)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Errorf("%d %+v: err = %v, want %v", i, tc.tr, err, tc.wantErr)
		}
	}
	m, _ := s.Meta(ctx)
	if m.State != "decided" {
		t.Errorf("state = %q", m.State)
	}
	audit, _ := s.Audit(ctx)
	var tos []string
	for _, a := range audit {
		tos = append(tos, a.From+">"+a.To)
	}
	if got := strings.Join(tos, ","); got != ">approved,approved>frozen,frozen>running,running>decided" {
		t.Errorf("audit trail = %s", got)
	}
}

func TestCancelledContext(t *testing.T) {
	s, _ := openFrozen(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.PutReceipt(ctx, sample("a", "t", 0, 1, Scored)); !errors.Is(err, context.Canceled) {
		t.Errorf("PutReceipt: %v", err)
	}
	if _, err := s.Receipts(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Receipts: %v", err)
	}
}

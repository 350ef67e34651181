package receipts

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPutReceiptIdempotent(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	r := sample("smollm2", "t1", 0, 1, Scored)
	if err := s.PutReceipt(ctx, r); err != nil {
		t.Fatal(err)
	}
	// The same receipt with the same instant in another zone is the same receipt.
	same := r
	same.StartedAt = r.StartedAt.UTC()
	same.FinishedAt = r.FinishedAt.In(time.FixedZone("Y", -7200))
	if err := s.PutReceipt(ctx, same); err != nil {
		t.Errorf("same receipt again: %v", err)
	}
	changed := r
	changed.OutputTokens++
	err := s.PutReceipt(ctx, changed)
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) || ce.What != "receipt" {
		t.Fatalf("changed receipt: err = %v, want a receipt ConflictError", err)
	}
	got, err := s.Receipt(ctx, "e1", r.Trial(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.OutputTokens != r.OutputTokens || got.SchemaVersion != SchemaVersion || !got.StartedAt.Equal(r.StartedAt) {
		t.Errorf("stored receipt = %+v", got)
	}
	if _, err := s.Receipt(ctx, "e1", r.Trial(), 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing attempt: err = %v", err)
	}
	if _, err := s.Receipt(ctx, "e404", r.Trial(), 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing execution: err = %v", err)
	}
}

func TestPutReceiptRefusals(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	if err := s.PutReceipt(ctx, sample("a", "t1", 0, 1, Scored)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		edit    func(*Receipt)
		wantErr error
		field   string
	}{
		{"other design hash", func(r *Receipt) { r.DesignHash = genSHA('d') }, ErrInvalid, "design_hash"},
		{"unknown execution", func(r *Receipt) { r.ExecutionID = "e9" }, ErrInvalid, "execution_id"},
		{"parent attempt missing", func(r *Receipt) { r.Attempt, r.ParentAttempt, r.TaskID = 3, 2, "t2" }, ErrInvalid, "parent_attempt"},
		{"trial counted twice", func(r *Receipt) { r.Attempt, r.ParentAttempt = 2, 1 }, ErrConflict, ""},
		{"capped after scored", func(r *Receipt) {
			r.Attempt, r.ParentAttempt, r.Outcome = 2, 1, Capped
		}, ErrConflict, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sample("a", "t1", 0, 1, Scored)
			tc.edit(&r)
			err := s.PutReceipt(ctx, r)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			var fe *FieldError
			if tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
				t.Errorf("err = %v, want field %s", err, tc.field)
			}
		})
	}
	rs, err := s.Receipts(ctx, "e1")
	if err != nil || len(rs) != 1 {
		t.Errorf("refused writes left %d receipts (%v), want 1", len(rs), err)
	}
}

func TestReceiptValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Receipt)
		field string
	}{
		{"schema", func(r *Receipt) { r.SchemaVersion = 7 }, "schema_version"},
		{"study", func(r *Receipt) { r.StudyID = "" }, "study_id"},
		{"arm with separator", func(r *Receipt) { r.Arm = "a|b" }, "arm"},
		{"task", func(r *Receipt) { r.TaskID = "" }, "task_id"},
		{"repeat", func(r *Receipt) { r.Repeat = -1 }, "repeat"},
		{"attempt", func(r *Receipt) { r.Attempt = 0 }, "attempt"},
		{"rerun without parent", func(r *Receipt) { r.Attempt = 2 }, "parent_attempt"},
		{"parent not earlier", func(r *Receipt) { r.ParentAttempt = 1 }, "parent_attempt"},
		{"outcome", func(r *Receipt) { r.Outcome = "won" }, "outcome"},
		{"digest", func(r *Receipt) { r.ModelDigest = " " }, "model_digest"},
		{"harness", func(r *Receipt) { r.HarnessVersion = "" }, "harness"},
		{"pins", func(r *Receipt) { r.Pins = nil }, "pins"},
		{"empty pin name", func(r *Receipt) { r.Pins = map[string]string{"": "x"} }, "pins"},
		{"machine", func(r *Receipt) { r.Machine = "" }, "machine"},
		{"tokens", func(r *Receipt) { r.ThinkingTokens = -1 }, "tokens"},
		{"wall", func(r *Receipt) { r.WallMS = -5 }, "wall_ms"},
		{"generation sha", func(r *Receipt) { r.GenerationSHA256 = "ABC" }, "generation_sha256"},
		{"scored without generation", func(r *Receipt) { r.GenerationSHA256 = "" }, "generation_sha256"},
		{"scored without grade", func(r *Receipt) { r.Grade = nil }, "grade"},
		{"grader unnamed", func(r *Receipt) { r.Grade.Grader = "" }, "grade.grader"},
		{"times reversed", func(r *Receipt) { r.FinishedAt = r.StartedAt.Add(-time.Second) }, "finished_at"},
		{"preempted with grade", func(r *Receipt) { r.Outcome = Preempted }, "grade"},
		{"error with grade", func(r *Receipt) { r.Outcome = Error }, "grade"},
		{"failed at card passes", func(r *Receipt) { r.Outcome = FailedAtCard }, "grade.pass"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sample("a", "t1", 0, 1, Scored)
			r.SchemaVersion = SchemaVersion
			tc.edit(&r)
			err := r.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || fe.Fix == "" {
				t.Errorf("err = %v, want field %s with a fix", err, tc.field)
			}
		})
	}
	for _, o := range []Outcome{Scored, Preempted, FailedAtCard, Capped, Error} {
		r := sample("a", "t1", 0, 1, o)
		r.SchemaVersion = SchemaVersion
		if err := r.Validate(); err != nil {
			t.Errorf("valid %s receipt refused: %v", o, err)
		}
	}
}

// A preempted trial is rerun as the next attempt; only the scored attempt is
// counted, and a resumed loop learns the next attempt from the store.
func TestAttemptsAndCounted(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	k := TrialKey{Arm: "gemma", TaskID: "t7", Repeat: 2}
	a, p, err := s.NextAttempt(ctx, "e1", k)
	if err != nil || a != 1 || p != 0 {
		t.Fatalf("NextAttempt on a new trial = %d, %d, %v", a, p, err)
	}
	if err := s.PutReceipt(ctx, sample("gemma", "t7", 2, 1, Preempted)); err != nil {
		t.Fatal(err)
	}
	a, p, _ = s.NextAttempt(ctx, "e1", k)
	if a != 2 || p != 1 {
		t.Fatalf("NextAttempt after a preemption = %d, %d; want 2, 1", a, p)
	}
	if err := s.PutReceipt(ctx, sample("gemma", "t7", 2, 2, Scored)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutReceipt(ctx, sample("gemma", "t8", 0, 1, FailedAtCard)); err != nil {
		t.Fatal(err)
	}
	c, err := s.Counted(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 2 || c[k].Attempt != 2 || c[TrialKey{"gemma", "t8", 0}].Outcome != FailedAtCard {
		t.Errorf("Counted = %+v", c)
	}
	if _, err := s.Counted(ctx, ""); err == nil {
		t.Error("Counted without an execution id succeeded")
	}
	all, _ := s.Receipts(ctx, "")
	if len(all) != 3 {
		t.Errorf("%d receipts, want 3", len(all))
	}
}

// TrialStates says, for the keys asked and in their order, what Counted and
// NextAttempt say of each, without reading the execution's other receipts.
func TestTrialStatesAgreeWithCountedAndNextAttempt(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	for _, r := range []Receipt{
		sample("gemma", "t1", 0, 1, Preempted), sample("gemma", "t1", 0, 2, Scored),
		sample("gemma", "t2", 0, 1, Preempted),
		sample("gemma", "t3", 0, 1, Capped),
		sample("gemma", "t4", 0, 1, Error),
	} {
		if err := s.PutReceipt(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	keys := []TrialKey{{"gemma", "t4", 0}, {"gemma", "t1", 0}, {"gemma", "t9", 0}, {"gemma", "t2", 0}, {"gemma", "t3", 0}}
	got, err := s.TrialStates(ctx, "e1", keys)
	if err != nil {
		t.Fatal(err)
	}
	counted, err := s.Counted(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Fatalf("%d states for %d keys", len(got), len(keys))
	}
	for i, k := range keys {
		a, p, err := s.NextAttempt(ctx, "e1", k)
		if err != nil {
			t.Fatal(err)
		}
		_, c := counted[k]
		if want := (TrialState{Counted: c, Attempt: a, Parent: p}); got[i] != want {
			t.Errorf("%s: TrialStates says %+v, Counted and NextAttempt say %+v", k, got[i], want)
		}
	}
	if !got[1].Counted || got[1].Attempt != 3 || got[2].Counted || got[2].Attempt != 1 || got[0].Counted {
		t.Errorf("states %+v: want t1 counted (next 3), t9 new, t4's error not counted", got)
	}
	none, err := s.TrialStates(ctx, "no-such-execution", keys[:1])
	if err != nil || none[0] != (TrialState{Attempt: 1}) {
		t.Errorf("an execution with no receipts: %+v, %v", none, err)
	}
}

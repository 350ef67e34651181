package receipts

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

func TestExecutions(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	tests := []struct {
		name    string
		e       Execution
		wantErr error
	}{
		{"same again", Execution{ID: "e1", Attempt: 1, Status: Planned, PlanSeed: 42, DesignHash: testHash}, nil},
		{"same id other seed", Execution{ID: "e1", Attempt: 1, Status: Planned, PlanSeed: 43, DesignHash: testHash}, ErrConflict},
		{"rerun", Execution{ID: "e2", Parent: "e1", Attempt: 2, Status: Planned, PlanSeed: 42, DesignHash: testHash}, nil},
		{"rerun wrong attempt", Execution{ID: "e3", Parent: "e2", Attempt: 2, Status: Planned, DesignHash: testHash}, ErrInvalid},
		{"unknown parent", Execution{ID: "e4", Parent: "nope", Attempt: 2, Status: Planned, DesignHash: testHash}, ErrInvalid},
		{"first not attempt 1", Execution{ID: "e5", Attempt: 2, Status: Planned, DesignHash: testHash}, ErrInvalid},
		{"other design", Execution{ID: "e6", Attempt: 1, Status: Planned, DesignHash: "x"}, ErrInvalid},
		{"bad status", Execution{ID: "e7", Attempt: 1, Status: "paused", DesignHash: testHash}, ErrInvalid},
		{"bad id", Execution{ID: "", Attempt: 1, Status: Planned, DesignHash: testHash}, ErrInvalid},
	}
	for _, tc := range tests {
		err := s.PutExecution(ctx, tc.e)
		if tc.wantErr == nil && err != nil || !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.wantErr)
		}
	}
	all, err := s.Executions(ctx)
	if err != nil || len(all) != 2 || all[1].Parent != "e1" || all[1].Attempt != 2 {
		t.Fatalf("Executions = %+v, %v", all, err)
	}

	if err := s.SetExecutionStatus(ctx, "e2", Running, Done, "daemon", "x"); !errors.Is(err, ErrStaleState) {
		t.Errorf("stale from: err = %v", err)
	}
	if err := s.SetExecutionStatus(ctx, "e2", Planned, Running, "daemon", "gates passed"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetExecutionStatus(ctx, "e2", Running, "odd", "daemon", "x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad status: err = %v", err)
	}
	if err := s.SetExecutionStatus(ctx, "e2", Running, Done, "", "x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("no who: err = %v", err)
	}
	if err := s.SetExecutionStatus(ctx, "e404", Planned, Running, "d", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown execution: err = %v", err)
	}
	e, err := s.Execution(ctx, "e2")
	if err != nil || e.Status != Running {
		t.Errorf("Execution(e2) = %+v, %v", e, err)
	}
	audit, _ := s.Audit(ctx)
	last := audit[len(audit)-1]
	if last.Subject != "e2" || last.From != "planned" || last.To != "running" || last.Why != "gates passed" {
		t.Errorf("last audit entry = %+v", last)
	}
	if _, err := s.Execution(ctx, "e404"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Execution(e404): %v", err)
	}
}

func TestPreflight(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	v := json.RawMessage(`{"verdict": "fits", "margin_bytes": 1024}`)
	if err := s.PutPreflight(ctx, "smollm2", "24g", v); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPreflight(ctx, "smollm2", "24g", json.RawMessage(`{"verdict":"fits","margin_bytes":1024}`)); err != nil {
		t.Errorf("same verdict, other spacing: %v", err)
	}
	if err := s.PutPreflight(ctx, "smollm2", "24g", json.RawMessage(`{"verdict":"doesn't fit"}`)); !errors.Is(err, ErrConflict) {
		t.Errorf("changed verdict: err = %v", err)
	}
	if err := s.PutPreflight(ctx, "smollm2", "8g", json.RawMessage(`{bad`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad JSON: err = %v", err)
	}
	if err := s.PutPreflight(ctx, "", "8g", v); !errors.Is(err, ErrInvalid) {
		t.Errorf("no arm: err = %v", err)
	}
	got, err := s.Preflight(ctx, "smollm2", "24g")
	if err != nil || string(got) != `{"verdict":"fits","margin_bytes":1024}` {
		t.Errorf("Preflight = %s, %v", got, err)
	}
	if _, err := s.Preflight(ctx, "smollm2", "8g"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing verdict: err = %v", err)
	}
	all, err := s.Preflights(ctx)
	if err != nil || len(all) != 1 || all[0].Arm != "smollm2" || all[0].Profile != "24g" {
		t.Errorf("Preflights = %+v, %v", all, err)
	}
}

func TestGovernorEvents(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	for i, kind := range []string{"limit", "preempt", "heartbeat_stale"} {
		seq, err := s.AppendGovernorEvent(ctx, GovernorEvent{ExecutionID: "e1", Trial: "a|t|0", Kind: kind, Detail: json.RawMessage(`{"temp_c":91}`)})
		if err != nil || seq != uint64(i+1) {
			t.Fatalf("append %s: seq %d, %v", kind, seq, err)
		}
	}
	if _, err := s.AppendGovernorEvent(ctx, GovernorEvent{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no kind: err = %v", err)
	}
	if _, err := s.AppendGovernorEvent(ctx, GovernorEvent{Kind: "x", Detail: json.RawMessage(`{`)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad detail: err = %v", err)
	}
	evs, err := s.GovernorEvents(ctx)
	if err != nil || len(evs) != 3 || evs[1].Kind != "preempt" || evs[2].Seq != 3 || evs[0].At.IsZero() {
		t.Errorf("GovernorEvents = %+v, %v", evs, err)
	}
}

func TestIdempotency(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	req := []byte(`{"study":"s1","run":"e1"}`)
	if _, found, err := s.LookupIdempotency(ctx, "k1", req); found || err != nil {
		t.Fatalf("new key: found=%v err=%v", found, err)
	}
	id, replay, err := s.ClaimIdempotency(ctx, "k1", req, "e1")
	if err != nil || replay || id != "e1" {
		t.Fatalf("first claim = %q, %v, %v", id, replay, err)
	}
	id, replay, err = s.ClaimIdempotency(ctx, "k1", req, "e2")
	if err != nil || !replay || id != "e1" {
		t.Errorf("same key and body = %q, %v, %v; want the existing e1", id, replay, err)
	}
	_, _, err = s.ClaimIdempotency(ctx, "k1", []byte(`{"study":"s1","run":"other"}`), "e3")
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.What != "idempotency key" {
		t.Errorf("same key, other body: err = %v", err)
	}
	if _, _, err := s.LookupIdempotency(ctx, "k1", []byte("other")); !errors.Is(err, ErrConflict) {
		t.Errorf("lookup with other body: err = %v", err)
	}
	if id, found, err := s.LookupIdempotency(ctx, "k1", req); !found || id != "e1" || err != nil {
		t.Errorf("lookup = %q, %v, %v", id, found, err)
	}
	if _, _, err := s.ClaimIdempotency(ctx, "", req, "e1"); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty key: err = %v", err)
	}
	if _, _, err := s.ClaimIdempotency(ctx, "k2", req, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty record id: err = %v", err)
	}
	if RequestHash(req) == RequestHash([]byte("x")) || len(RequestHash(req)) != 64 {
		t.Error("RequestHash does not tell bodies apart")
	}
}

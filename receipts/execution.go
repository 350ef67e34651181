package receipts

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Status is an execution's state.
type Status string

// Execution states. The store checks compare-and-set; the run loop decides the
// order.
const (
	Planned   Status = "planned"
	Running   Status = "running"
	Done      Status = "done"
	Cancelled Status = "cancelled"
	Failed    Status = "failed"
	// StoppedEarly: the design's stopping rule settled every monitored
	// comparison before the plan ran out; the trials left are not run
	// (never missing). Its Stop record says at which look and why.
	StoppedEarly Status = "stopped_early"
)

func (s Status) valid() bool {
	switch s {
	case Planned, Running, Done, Cancelled, Failed, StoppedEarly:
		return true
	}
	return false
}

// Execution is one run of a frozen study. Rerunning a frozen study is a new
// execution whose Parent is the execution it reruns and whose Attempt is one
// more than the parent's; it never refreshes anything.
type Execution struct {
	ID         string    `json:"id"`
	Parent     string    `json:"parent"`
	Attempt    int       `json:"attempt"`
	Status     Status    `json:"status"`
	PlanSeed   uint64    `json:"plan_seed"`
	DesignHash string    `json:"design_hash"`
	CreatedAt  time.Time `json:"created_at"`
}

// PutExecution records a new execution. Putting the same execution again is a
// no-op; putting a different one under the same id is a *ConflictError. The
// store must be frozen and the execution must carry the frozen design hash.
func (s *Store) PutExecution(ctx context.Context, e Execution) error {
	bad := func(field, msg, fix string) error {
		return &FieldError{Record: "execution " + e.ID, Field: field, Msg: msg, Fix: fix}
	}
	if !validID(e.ID) {
		return bad("id", "is empty or holds '|' or control characters", "give the execution an id")
	}
	if !e.Status.valid() {
		return bad("status", fmt.Sprintf("%q is not a status", e.Status), "use planned, running, done, stopped_early, cancelled or failed")
	}
	e.CreatedAt = e.CreatedAt.UTC()
	return s.update(ctx, func(tx *bolt.Tx) error {
		m := readMeta(tx)
		if !m.Frozen {
			return fmt.Errorf("%s: execution %s: %w (freeze the design before any execution)", s.path, e.ID, ErrNotFrozen)
		}
		if e.DesignHash != m.DesignHash {
			return bad("design_hash", fmt.Sprintf("%q is not the frozen design's %q", e.DesignHash, m.DesignHash), "executions run the frozen design as it is")
		}
		b := tx.Bucket(bucketExecutions)
		if e.Parent == "" {
			if e.Attempt != 1 {
				return bad("attempt", fmt.Sprintf("%d on an execution without a parent", e.Attempt), "a first execution is attempt 1")
			}
		} else {
			var parent Execution
			found, err := getJSON(b, []byte(e.Parent), &parent)
			if err != nil {
				return fmt.Errorf("%s: execution %s: %w", s.path, e.Parent, err)
			}
			if !found {
				return bad("parent", fmt.Sprintf("no execution %q", e.Parent), "name an existing execution, or leave parent empty for a first run")
			}
			if e.Attempt != parent.Attempt+1 {
				return bad("attempt", fmt.Sprintf("%d, but the parent is attempt %d", e.Attempt, parent.Attempt), fmt.Sprintf("set attempt %d", parent.Attempt+1))
			}
		}
		raw, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if old := b.Get([]byte(e.ID)); old != nil {
			if string(old) == string(raw) {
				return nil
			}
			return &ConflictError{What: "execution", Key: e.ID, Fix: "give a new execution a new id"}
		}
		return b.Put([]byte(e.ID), raw)
	})
}

// Execution returns the execution with the given id.
func (s *Store) Execution(ctx context.Context, id string) (Execution, error) {
	var e Execution
	err := s.view(ctx, func(tx *bolt.Tx) error {
		found, err := getJSON(tx.Bucket(bucketExecutions), []byte(id), &e)
		if err != nil {
			return fmt.Errorf("%s: execution %s: %w", s.path, id, err)
		}
		if !found {
			return fmt.Errorf("execution %q: %w", id, ErrNotFound)
		}
		return nil
	})
	return e, err
}

// Executions returns every execution, ordered by id.
func (s *Store) Executions(ctx context.Context) ([]Execution, error) {
	var out []Execution
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketExecutions).ForEach(func(k, v []byte) error {
			var e Execution
			if err := strictUnmarshal(v, &e); err != nil {
				return fmt.Errorf("%s: execution %s: %w", s.path, k, err)
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// SetExecutionStatus moves an execution from one status to another and audits
// it (who, when, why). It fails with ErrStaleState if the execution is not in
// from.
func (s *Store) SetExecutionStatus(ctx context.Context, id string, from, to Status, who, why string) error {
	if !to.valid() {
		return &FieldError{Record: "execution " + id, Field: "status", Msg: fmt.Sprintf("%q is not a status", to), Fix: "use planned, running, done, stopped_early, cancelled or failed"}
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExecutions)
		var e Execution
		found, err := getJSON(b, []byte(id), &e)
		if err != nil {
			return fmt.Errorf("%s: execution %s: %w", s.path, id, err)
		}
		if !found {
			return fmt.Errorf("execution %q: %w", id, ErrNotFound)
		}
		if e.Status != from {
			return fmt.Errorf("execution %s: status %q → %q: it is %q: %w", id, from, to, e.Status, ErrStaleState)
		}
		t := Transition{Subject: id, From: string(from), To: string(to), Who: who, Why: why}
		if err := t.validate(); err != nil {
			return err
		}
		e.Status = to
		raw, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(id), raw); err != nil {
			return err
		}
		return appendAudit(tx, t)
	})
}

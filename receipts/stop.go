package receipts

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// PutStop records an execution's early-stopping look: the last time the
// runner checked the design's stopping rule (the look that stopped it, or
// the last one before the plan ran out). It is the execution-level record
// the analysis and the report read; the store keeps it opaque, as it keeps
// preflight verdicts. A later look replaces an earlier one.
func (s *Store) PutStop(ctx context.Context, executionID string, look json.RawMessage) error {
	if !validID(executionID) {
		return &FieldError{Record: "stop", Field: "execution", Msg: fmt.Sprintf("%q is not a valid id", executionID), Fix: "name the execution the look belongs to"}
	}
	if !json.Valid(look) {
		return &FieldError{Record: "stop of " + executionID, Field: "look", Msg: "is not JSON", Fix: "pass the marshalled look"}
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bucketExecutions).Get([]byte(executionID)) == nil {
			return fmt.Errorf("execution %q: %w", executionID, ErrNotFound)
		}
		return tx.Bucket(bucketStops).Put([]byte(executionID), append([]byte(nil), look...))
	})
}

// Stop returns an execution's early-stopping look; found is false when the
// execution has none (its design has no stopping rule, or no check ran yet).
func (s *Store) Stop(ctx context.Context, executionID string) (look json.RawMessage, found bool, err error) {
	err = s.view(ctx, func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketStops).Get([]byte(executionID)); v != nil {
			look, found = append(json.RawMessage(nil), v...), true
		}
		return nil
	})
	return look, found, err
}

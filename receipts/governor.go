package receipts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// GovernorEvent is one thing the safety governor did or saw during a study: a
// preemption, a limit crossed, a stale heartbeat. Events are appended, never
// rewritten. Detail is opaque here; the governor package owns its shape.
type GovernorEvent struct {
	Seq         uint64          `json:"seq"`
	At          time.Time       `json:"at"`
	ExecutionID string          `json:"execution_id"`
	Trial       string          `json:"trial"`
	Kind        string          `json:"kind"`
	Detail      json.RawMessage `json:"detail,omitempty"`
}

// AppendGovernorEvent appends ev and returns its sequence number. A zero At is
// set to now.
func (s *Store) AppendGovernorEvent(ctx context.Context, ev GovernorEvent) (uint64, error) {
	if strings.TrimSpace(ev.Kind) == "" {
		return 0, &FieldError{Record: "governor event", Field: "kind", Msg: "is empty", Fix: "say what happened (preempt, limit, heartbeat_stale, …)"}
	}
	if len(ev.Detail) > 0 && !json.Valid(ev.Detail) {
		return 0, &FieldError{Record: "governor event", Field: "detail", Msg: "is not JSON", Fix: "pass the detail as JSON"}
	}
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	ev.At = ev.At.UTC()
	var seq uint64
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketGovernor)
		var err error
		if seq, err = b.NextSequence(); err != nil {
			return err
		}
		ev.Seq = seq
		raw, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		return b.Put(seqKey(seq), raw)
	})
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// GovernorEvents returns every event in the order it was appended.
func (s *Store) GovernorEvents(ctx context.Context) ([]GovernorEvent, error) {
	var out []GovernorEvent
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketGovernor).ForEach(func(k, v []byte) error {
			var ev GovernorEvent
			if err := strictUnmarshal(v, &ev); err != nil {
				return fmt.Errorf("%s: governor event %x: %w", s.path, k, err)
			}
			out = append(out, ev)
			return nil
		})
	})
	return out, err
}

package receipts

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Transition is one audited change of state: of the study (Subject is the
// study id) or of an execution (Subject is the execution id). Which changes
// are legal is the studies package's business; the store checks only that From
// is the current state, so two writers cannot both move the same state.
type Transition struct {
	Seq     uint64    `json:"seq"`
	Subject string    `json:"subject"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Who     string    `json:"who"`
	Why     string    `json:"why"`
	At      time.Time `json:"at"`
}

func (t Transition) validate() error {
	bad := func(field, fix string) error {
		return &FieldError{Record: "transition", Field: field, Msg: "is empty", Fix: fix}
	}
	switch {
	case strings.TrimSpace(t.To) == "":
		return bad("to", "name the state being entered")
	case strings.TrimSpace(t.Who) == "":
		return bad("who", "name the person or process making the change")
	case strings.TrimSpace(t.Why) == "":
		return bad("why", "say why, in a sentence")
	}
	return nil
}

// Transition moves the study's state from t.From to t.To and appends it to the
// audit log. It fails with ErrStaleState if the study is not in t.From.
func (s *Store) Transition(ctx context.Context, t Transition) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		return transition(tx, s.owner, readMeta(tx).State, t)
	})
}

// transition checks and records a study-level transition inside tx.
func transition(tx *bolt.Tx, study, current string, t Transition) error {
	t.Subject = study
	if err := t.validate(); err != nil {
		return err
	}
	if t.From != current {
		return fmt.Errorf("study %s: transition %q → %q: the study is in %q: %w", study, t.From, t.To, current, ErrStaleState)
	}
	if err := tx.Bucket(bucketMeta).Put(metaState, []byte(t.To)); err != nil {
		return err
	}
	return appendAudit(tx, t)
}

func appendAudit(tx *bolt.Tx, t Transition) error {
	if t.At.IsZero() {
		t.At = time.Now()
	}
	t.At = t.At.UTC()
	b := tx.Bucket(bucketAudit)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	t.Seq = seq
	raw, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return b.Put(seqKey(seq), raw)
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// Audit returns the audit log in the order it was written.
func (s *Store) Audit(ctx context.Context) ([]Transition, error) {
	var out []Transition
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAudit).ForEach(func(k, v []byte) error {
			var t Transition
			if err := strictUnmarshal(v, &t); err != nil {
				return fmt.Errorf("%s: audit entry %x: %w", s.path, k, err)
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

package receipts

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// metaLifecycle holds the study's lifecycle document: the studies package's
// record of state, reviews, approval, snapshot and executions, kept here as
// opaque JSON so the store is the one place it lives.
var metaLifecycle = []byte("lifecycle")

// LifecycleChange is one write of the study's lifecycle document, with the
// audited transition it records, in one transaction.
type LifecycleChange struct {
	// Prev is the document the change was computed from, as Lifecycle
	// returned it (nil when the store holds none). Another writer having
	// changed it since is ErrStaleState, and nothing is written.
	Prev []byte
	// Doc is the new document, JSON the store does not read.
	Doc []byte
	// Transition is the study-level state change Doc records, if the state
	// moved; nil when it did not (a failing review, say).
	Transition *Transition
	// FreezeDesign, when set, also marks the design frozen under this hash,
	// as Freeze does: the same hash again skips the transition and still
	// writes Doc; another hash is a *ConflictError.
	FreezeDesign string
}

// Lifecycle returns the study's lifecycle document; found is false when the
// store holds none (a new store, or one written before the store kept it).
func (s *Store) Lifecycle(ctx context.Context) (doc []byte, found bool, err error) {
	err = s.view(ctx, func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaLifecycle); v != nil {
			doc, found = bytes.Clone(v), true
		}
		return nil
	})
	return doc, found, err
}

// PutLifecycle writes the lifecycle document and records its transition (and
// freeze) in the same transaction, so the document and the audit log never
// disagree.
func (s *Store) PutLifecycle(ctx context.Context, c LifecycleChange) error {
	if len(bytes.TrimSpace(c.Doc)) == 0 {
		return &FieldError{Record: "lifecycle", Field: "doc", Msg: "is empty", Fix: "write the study's lifecycle as JSON"}
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if cur := m.Get(metaLifecycle); !bytes.Equal(cur, c.Prev) || (cur == nil) != (c.Prev == nil) {
			return fmt.Errorf("study %s: its lifecycle changed since it was read (another request moved it; read it again): %w", s.owner, ErrStaleState)
		}
		meta := readMeta(tx)
		switch {
		case c.FreezeDesign != "":
			if meta.Frozen {
				if meta.DesignHash != c.FreezeDesign {
					return &ConflictError{What: "frozen design of study", Key: s.owner, Existing: meta.DesignHash,
						Fix: "a frozen design never changes; register a new study for a new design"}
				}
				break
			}
			if c.Transition == nil {
				return &FieldError{Record: "lifecycle", Field: "transition", Msg: "is missing on a freeze", Fix: "record the transition that froze the design"}
			}
			if err := transition(tx, s.owner, meta.State, *c.Transition); err != nil {
				return err
			}
			if err := m.Put(metaFrozen, []byte("1")); err != nil {
				return err
			}
			if err := m.Put(metaDesignHash, []byte(c.FreezeDesign)); err != nil {
				return err
			}
		case c.Transition != nil:
			if err := transition(tx, s.owner, meta.State, *c.Transition); err != nil {
				return err
			}
		}
		return m.Put(metaLifecycle, bytes.Clone(c.Doc))
	})
}

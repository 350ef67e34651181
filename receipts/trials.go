package receipts

import (
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// PutReceipt stores a trial's receipt under execution / trial / attempt.
// Writing the same receipt again is a no-op, so a run loop that crashed after
// the write can repeat it; different content under the same key is a
// *ConflictError. It refuses receipts of another study or another design
// hash, receipts for unknown executions or parent attempts, and a second
// counted receipt (scored, failed_at_card or capped) for a trial that already
// has one in the execution. A zero SchemaVersion is filled in.
func (s *Store) PutReceipt(ctx context.Context, r Receipt) error {
	if r.SchemaVersion == 0 {
		r.SchemaVersion = SchemaVersion
	}
	if err := r.Validate(); err != nil {
		return err
	}
	raw, err := r.encode()
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		if r.StudyID != s.owner {
			return &ForeignStudyError{Path: s.path, Owner: s.owner, Writer: r.StudyID, Frozen: readMeta(tx).Frozen}
		}
		m := readMeta(tx)
		if !m.Frozen {
			return fmt.Errorf("%s: receipt %s: %w (freeze the design before any run)", s.path, r.Trial(), ErrNotFrozen)
		}
		if r.DesignHash != m.DesignHash {
			return &FieldError{Record: "receipt " + r.Trial().String(), Field: "design_hash",
				Msg: fmt.Sprintf("%q is not the frozen design's %q", r.DesignHash, m.DesignHash), Fix: "receipts belong to the frozen design of their study"}
		}
		if tx.Bucket(bucketExecutions).Get([]byte(r.ExecutionID)) == nil {
			return &FieldError{Record: "receipt " + r.Trial().String(), Field: "execution_id",
				Msg: fmt.Sprintf("no execution %q", r.ExecutionID), Fix: "record the execution with PutExecution first"}
		}
		rb, err := tx.Bucket(bucketReceipts).CreateBucketIfNotExists([]byte(r.ExecutionID))
		if err != nil {
			return err
		}
		key := receiptKey(r.Trial(), r.Attempt)
		if old := rb.Get(key); old != nil {
			if string(old) == string(raw) {
				return nil
			}
			return &ConflictError{What: "receipt", Key: r.ExecutionID + "/" + r.Trial().String() + "#" + fmt.Sprint(r.Attempt),
				Fix: "a receipt is written once; a rerun of the trial is a new attempt"}
		}
		if r.ParentAttempt > 0 && rb.Get(receiptKey(r.Trial(), r.ParentAttempt)) == nil {
			return &FieldError{Record: "receipt " + r.Trial().String(), Field: "parent_attempt",
				Msg: fmt.Sprintf("attempt %d of this trial is not in the store", r.ParentAttempt), Fix: "name the attempt this one reruns"}
		}
		if r.Outcome.Counted() {
			cb, err := tx.Bucket(bucketCounted).CreateBucketIfNotExists([]byte(r.ExecutionID))
			if err != nil {
				return err
			}
			ik := trialIndexKey(r.Trial())
			if prev := cb.Get(ik); prev != nil {
				return &ConflictError{What: "counted trial", Key: r.ExecutionID + "/" + r.Trial().String(), Existing: string(prev),
					Fix: "a trial is scored once per execution; rerun the study as a new execution to score it again"}
			}
			if err := cb.Put(ik, key); err != nil {
				return err
			}
		}
		return rb.Put(key, raw)
	})
}

// Receipt returns one receipt.
func (s *Store) Receipt(ctx context.Context, executionID string, k TrialKey, attempt int) (Receipt, error) {
	var r Receipt
	err := s.view(ctx, func(tx *bolt.Tx) error {
		rb := tx.Bucket(bucketReceipts).Bucket([]byte(executionID))
		if rb == nil {
			return fmt.Errorf("receipt %s/%s#%d: %w", executionID, k, attempt, ErrNotFound)
		}
		found, err := getJSON(rb, receiptKey(k, attempt), &r)
		if err != nil {
			return fmt.Errorf("%s: receipt %s/%s#%d: %w", s.path, executionID, k, attempt, err)
		}
		if !found {
			return fmt.Errorf("receipt %s/%s#%d: %w", executionID, k, attempt, ErrNotFound)
		}
		return nil
	})
	return r, err
}

// Receipts returns the receipts of one execution, or of all executions when
// executionID is empty, in key order (execution, arm, task, repeat, attempt).
func (s *Store) Receipts(ctx context.Context, executionID string) ([]Receipt, error) {
	var out []Receipt
	err := s.eachReceipt(ctx, executionID, func(r Receipt) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// Counted returns, for one execution, the counted receipt of every trial that
// has one. A resumed run skips these trials and reruns the rest.
func (s *Store) Counted(ctx context.Context, executionID string) (map[TrialKey]Receipt, error) {
	if executionID == "" {
		return nil, errors.New("receipts: Counted needs an execution id")
	}
	out := map[TrialKey]Receipt{}
	err := s.eachReceipt(ctx, executionID, func(r Receipt) error {
		if r.Outcome.Counted() {
			out[r.Trial()] = r
		}
		return nil
	})
	return out, err
}

// NextAttempt returns the attempt number a new try of the trial should carry
// in the execution, and the parent attempt it reruns (0 for a first try).
func (s *Store) NextAttempt(ctx context.Context, executionID string, k TrialKey) (attempt, parent int, err error) {
	err = s.view(ctx, func(tx *bolt.Tx) error {
		rb := tx.Bucket(bucketReceipts).Bucket([]byte(executionID))
		attempt = 1
		if rb == nil {
			return nil
		}
		for a := 1; rb.Get(receiptKey(k, a)) != nil; a++ {
			parent, attempt = a, a+1
		}
		return nil
	})
	return attempt, parent, err
}

// TrialState is where one trial of an execution stands: whether it has a
// counted receipt, and the attempt a new try of it carries with the parent
// attempt that try reruns (as NextAttempt).
type TrialState struct {
	Counted         bool
	Attempt, Parent int
}

// TrialStates is the state of each of keys in the execution, read in one
// transaction from the counted index and the attempts' keys. No receipt is
// decoded, so a chunk of a large plan costs its own size, not the whole
// execution's (Counted reads every receipt).
func (s *Store) TrialStates(ctx context.Context, executionID string, keys []TrialKey) ([]TrialState, error) {
	out := make([]TrialState, len(keys))
	err := s.view(ctx, func(tx *bolt.Tx) error {
		rb := tx.Bucket(bucketReceipts).Bucket([]byte(executionID))
		cb := tx.Bucket(bucketCounted).Bucket([]byte(executionID))
		for i, k := range keys {
			out[i].Attempt = 1
			if cb != nil && cb.Get(trialIndexKey(k)) != nil {
				out[i].Counted = true
			}
			if rb == nil {
				continue
			}
			for a := 1; rb.Get(receiptKey(k, a)) != nil; a++ {
				out[i].Parent, out[i].Attempt = a, a+1
			}
		}
		return nil
	})
	return out, err
}

func (s *Store) eachReceipt(ctx context.Context, executionID string, fn func(Receipt) error) error {
	return s.view(ctx, func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketReceipts)
		visit := func(exec []byte, rb *bolt.Bucket) error {
			return rb.ForEach(func(k, v []byte) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				var r Receipt
				if err := strictUnmarshal(v, &r); err != nil {
					return fmt.Errorf("%s: receipt %s/%s: %w", s.path, exec, k, err)
				}
				return fn(r)
			})
		}
		if executionID != "" {
			rb := root.Bucket([]byte(executionID))
			if rb == nil {
				return nil
			}
			return visit([]byte(executionID), rb)
		}
		return root.ForEach(func(name, v []byte) error {
			if v != nil {
				return fmt.Errorf("%s: receipts bucket holds a stray key %q", s.path, name)
			}
			return visit(name, root.Bucket(name))
		})
	})
}

package receipts

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Summary counts what Check read.
type Summary struct {
	Executions int
	Receipts   int
	Counted    int
	Audit      int
	Governor   int
}

// Check reads the whole store and reports every problem it finds: a receipt
// that does not decode or validate, a key that does not match its receipt, a
// receipt of another study, design or unknown execution, a missing parent
// attempt, a trial counted twice in an execution, a counted index out of step
// with the receipts, and audit or governor entries that do not decode. It
// returns an *IntegrityError (errors.Is ErrIntegrity) listing them all.
func (s *Store) Check(ctx context.Context) (Summary, error) {
	var sum Summary
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	err := s.view(ctx, func(tx *bolt.Tx) error {
		meta := readMeta(tx)
		if meta.StudyID == "" {
			add("meta: study id is missing")
		}
		if meta.SchemaVersion < 1 || meta.SchemaVersion > SchemaVersion {
			add("meta: schema version %d is not known", meta.SchemaVersion)
		}
		if meta.Frozen && meta.DesignHash == "" {
			add("meta: frozen without a design hash")
		}

		execs := map[string]Execution{}
		err := tx.Bucket(bucketExecutions).ForEach(func(k, v []byte) error {
			var e Execution
			if err := strictUnmarshal(v, &e); err != nil {
				add("execution %s: does not decode: %v", k, err)
				return nil
			}
			if e.ID != string(k) {
				add("execution %s: stored under the key of %q", e.ID, k)
			}
			execs[e.ID] = e
			return nil
		})
		if err != nil {
			return err
		}
		for id, e := range execs {
			sum.Executions++
			if e.DesignHash != meta.DesignHash {
				add("execution %s: design hash %q is not the frozen %q", id, e.DesignHash, meta.DesignHash)
			}
			if e.Parent != "" {
				if p, ok := execs[e.Parent]; !ok {
					add("execution %s: parent %q is missing", id, e.Parent)
				} else if e.Attempt != p.Attempt+1 {
					add("execution %s: attempt %d does not follow parent attempt %d", id, e.Attempt, p.Attempt)
				}
			}
		}

		root := tx.Bucket(bucketReceipts)
		counted := tx.Bucket(bucketCounted)
		err = root.ForEach(func(exec, v []byte) error {
			if v != nil {
				add("receipts: stray key %q outside any execution", exec)
				return nil
			}
			if _, ok := execs[string(exec)]; !ok {
				add("receipts of %s: no such execution", exec)
			}
			seenCounted := map[string]string{}
			rb := root.Bucket(exec)
			err := rb.ForEach(func(k, v []byte) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				sum.Receipts++
				where := fmt.Sprintf("receipt %s/%s", exec, k)
				var r Receipt
				if err := strictUnmarshal(v, &r); err != nil {
					add("%s: does not decode: %v", where, err)
					return nil
				}
				if err := r.Validate(); err != nil {
					add("%s: %v", where, err)
				}
				if !bytes.Equal(receiptKey(r.Trial(), r.Attempt), k) {
					add("%s: content says %s#%d", where, r.Trial(), r.Attempt)
				}
				if r.StudyID != meta.StudyID {
					add("%s: belongs to study %q", where, r.StudyID)
				}
				if r.ExecutionID != string(exec) {
					add("%s: names execution %q", where, r.ExecutionID)
				}
				if r.DesignHash != meta.DesignHash {
					add("%s: design hash %q is not the frozen %q", where, r.DesignHash, meta.DesignHash)
				}
				if r.ParentAttempt > 0 && rb.Get(receiptKey(r.Trial(), r.ParentAttempt)) == nil {
					add("%s: parent attempt %d is missing", where, r.ParentAttempt)
				}
				if r.Outcome.Counted() {
					sum.Counted++
					tk := r.Trial().String()
					if prev, dup := seenCounted[tk]; dup {
						add("%s: trial %s is counted twice in execution %s (also %s)", where, tk, exec, prev)
					}
					seenCounted[tk] = string(k)
					var idx []byte
					if cb := counted.Bucket(exec); cb != nil {
						idx = cb.Get(trialIndexKey(r.Trial()))
					}
					if !bytes.Equal(idx, k) {
						add("%s: counted index points at %q", where, idx)
					}
				}
				return nil
			})
			return err
		})
		if err != nil {
			return err
		}
		err = counted.ForEach(func(exec, v []byte) error {
			cb := counted.Bucket(exec)
			if cb == nil {
				add("counted: stray key %q", exec)
				return nil
			}
			return cb.ForEach(func(k, target []byte) error {
				rb := root.Bucket(exec)
				if rb == nil || rb.Get(target) == nil {
					add("counted index %s/%s: receipt %q is missing", exec, k, target)
				}
				return nil
			})
		})
		if err != nil {
			return err
		}

		err = tx.Bucket(bucketAudit).ForEach(func(k, v []byte) error {
			sum.Audit++
			var t Transition
			if err := strictUnmarshal(v, &t); err != nil {
				add("audit %x: does not decode: %v", k, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketGovernor).ForEach(func(k, v []byte) error {
			sum.Governor++
			var ev GovernorEvent
			if err := strictUnmarshal(v, &ev); err != nil {
				add("governor event %x: does not decode: %v", k, err)
			}
			return nil
		})
	})
	if err != nil {
		return sum, err
	}
	if len(problems) > 0 {
		return sum, &IntegrityError{Path: s.path, Problems: problems}
	}
	return sum, nil
}

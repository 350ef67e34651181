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
	c := &integrityCheck{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		meta := readMeta(tx)
		c.checkMeta(meta)
		execs, err := c.checkExecutions(tx, meta)
		if err != nil {
			return err
		}
		if err := c.checkReceipts(ctx, tx, meta, execs); err != nil {
			return err
		}
		if err := c.checkCountedIndex(tx); err != nil {
			return err
		}
		return c.checkLogs(tx)
	})
	if err != nil {
		return c.sum, err
	}
	if len(c.problems) > 0 {
		return c.sum, &IntegrityError{Path: s.path, Problems: c.problems}
	}
	return c.sum, nil
}

// integrityCheck gathers what Check counts and every problem it finds.
type integrityCheck struct {
	sum      Summary
	problems []string
}

func (c *integrityCheck) add(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *integrityCheck) checkMeta(meta Meta) {
	if meta.StudyID == "" {
		c.add("meta: study id is missing")
	}
	if meta.SchemaVersion < 1 || meta.SchemaVersion > SchemaVersion {
		c.add("meta: schema version %d is not known", meta.SchemaVersion)
	}
	if meta.Frozen && meta.DesignHash == "" {
		c.add("meta: frozen without a design hash")
	}
}

// checkExecutions decodes every execution and checks its key, design hash
// and parent attempt; it returns those that decode, by id.
func (c *integrityCheck) checkExecutions(tx *bolt.Tx, meta Meta) (map[string]Execution, error) {
	execs := map[string]Execution{}
	err := tx.Bucket(bucketExecutions).ForEach(func(k, v []byte) error {
		var e Execution
		if err := strictUnmarshal(v, &e); err != nil {
			c.add("execution %s: does not decode: %v", k, err)
			return nil
		}
		if e.ID != string(k) {
			c.add("execution %s: stored under the key of %q", e.ID, k)
		}
		execs[e.ID] = e
		return nil
	})
	if err != nil {
		return nil, err
	}
	for id, e := range execs {
		c.sum.Executions++
		if e.DesignHash != meta.DesignHash {
			c.add("execution %s: design hash %q is not the frozen %q", id, e.DesignHash, meta.DesignHash)
		}
		if e.Parent != "" {
			if p, ok := execs[e.Parent]; !ok {
				c.add("execution %s: parent %q is missing", id, e.Parent)
			} else if e.Attempt != p.Attempt+1 {
				c.add("execution %s: attempt %d does not follow parent attempt %d", id, e.Attempt, p.Attempt)
			}
		}
	}
	return execs, nil
}

// checkReceipts checks every receipt, execution by execution.
func (c *integrityCheck) checkReceipts(ctx context.Context, tx *bolt.Tx, meta Meta, execs map[string]Execution) error {
	root := tx.Bucket(bucketReceipts)
	counted := tx.Bucket(bucketCounted)
	return root.ForEach(func(exec, v []byte) error {
		if v != nil {
			c.add("receipts: stray key %q outside any execution", exec)
			return nil
		}
		if _, ok := execs[string(exec)]; !ok {
			c.add("receipts of %s: no such execution", exec)
		}
		seenCounted := map[string]string{}
		rb := root.Bucket(exec)
		return rb.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			c.sum.Receipts++
			c.checkReceipt(meta, exec, rb, counted, k, v, seenCounted)
			return nil
		})
	})
}

// checkReceipt checks the receipt v stored under k in execution exec's
// bucket rb: that it decodes and validates, that its key, study, execution
// and design match, that its parent attempt is there, and that a counted
// trial is counted once and indexed in the counted bucket. seenCounted maps the trials
// counted so far in exec to their receipt keys.
func (c *integrityCheck) checkReceipt(meta Meta, exec []byte, rb, counted *bolt.Bucket, k, v []byte, seenCounted map[string]string) {
	where := fmt.Sprintf("receipt %s/%s", exec, k)
	var r Receipt
	if err := strictUnmarshal(v, &r); err != nil {
		c.add("%s: does not decode: %v", where, err)
		return
	}
	if err := r.Validate(); err != nil {
		c.add("%s: %v", where, err)
	}
	if !bytes.Equal(receiptKey(r.Trial(), r.Attempt), k) {
		c.add("%s: content says %s#%d", where, r.Trial(), r.Attempt)
	}
	if r.StudyID != meta.StudyID {
		c.add("%s: belongs to study %q", where, r.StudyID)
	}
	if r.ExecutionID != string(exec) {
		c.add("%s: names execution %q", where, r.ExecutionID)
	}
	if r.DesignHash != meta.DesignHash {
		c.add("%s: design hash %q is not the frozen %q", where, r.DesignHash, meta.DesignHash)
	}
	if r.ParentAttempt > 0 && rb.Get(receiptKey(r.Trial(), r.ParentAttempt)) == nil {
		c.add("%s: parent attempt %d is missing", where, r.ParentAttempt)
	}
	if r.Outcome.Counted() {
		c.sum.Counted++
		tk := r.Trial().String()
		if prev, dup := seenCounted[tk]; dup {
			c.add("%s: trial %s is counted twice in execution %s (also %s)", where, tk, exec, prev)
		}
		seenCounted[tk] = string(k)
		var idx []byte
		if cb := counted.Bucket(exec); cb != nil {
			idx = cb.Get(trialIndexKey(r.Trial()))
		}
		if !bytes.Equal(idx, k) {
			c.add("%s: counted index points at %q", where, idx)
		}
	}
}

// checkCountedIndex checks that every entry of the counted index points at a
// receipt that exists.
func (c *integrityCheck) checkCountedIndex(tx *bolt.Tx) error {
	root := tx.Bucket(bucketReceipts)
	counted := tx.Bucket(bucketCounted)
	return counted.ForEach(func(exec, v []byte) error {
		cb := counted.Bucket(exec)
		if cb == nil {
			c.add("counted: stray key %q", exec)
			return nil
		}
		return cb.ForEach(func(k, target []byte) error {
			rb := root.Bucket(exec)
			if rb == nil || rb.Get(target) == nil {
				c.add("counted index %s/%s: receipt %q is missing", exec, k, target)
			}
			return nil
		})
	})
}

// checkLogs counts the audit and governor entries and checks each decodes.
func (c *integrityCheck) checkLogs(tx *bolt.Tx) error {
	err := tx.Bucket(bucketAudit).ForEach(func(k, v []byte) error {
		c.sum.Audit++
		var t Transition
		if err := strictUnmarshal(v, &t); err != nil {
			c.add("audit %x: does not decode: %v", k, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tx.Bucket(bucketGovernor).ForEach(func(k, v []byte) error {
		c.sum.Governor++
		var ev GovernorEvent
		if err := strictUnmarshal(v, &ev); err != nil {
			c.add("governor event %x: does not decode: %v", k, err)
		}
		return nil
	})
}

package receipts

import (
	"context"
	"encoding/json"

	bolt "go.etcd.io/bbolt"
)

// Divergent is a second receipt for a trial key and attempt that already has
// one, with a different digest: two workers both ran the same attempt (one
// was thought lost) and answered differently. It is kept as evidence and
// never counted or merged over the first.
type Divergent struct {
	Receipt Receipt `json:"receipt"`
	// Digest is the sha256 of the receipt as its worker wrote it.
	Digest string `json:"digest"`
	// Worker is the worker that returned it.
	Worker string `json:"worker"`
}

// PutDivergent records a divergent duplicate; the same one twice is a no-op.
func (s *Store) PutDivergent(ctx context.Context, d Divergent) error {
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	key := append(append([]byte(d.Receipt.ExecutionID+"|"), receiptKey(d.Receipt.Trial(), d.Receipt.Attempt)...), []byte("|"+d.Digest)...)
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDivergent)
		if b.Get(key) != nil {
			return nil
		}
		return b.Put(key, raw)
	})
}

// Divergents returns the divergent duplicates of one execution.
func (s *Store) Divergents(ctx context.Context, executionID string) ([]Divergent, error) {
	var out []Divergent
	prefix := []byte(executionID + "|")
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDivergent).Cursor()
		for k, v := c.Seek(prefix); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
			var d Divergent
			if err := json.Unmarshal(v, &d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

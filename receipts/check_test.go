package receipts

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func fill(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	for _, r := range []Receipt{
		sample("a", "t1", 0, 1, Scored),
		sample("a", "t2", 0, 1, Preempted),
		sample("a", "t2", 0, 2, Capped),
		sample("b", "t1", 1, 1, FailedAtCard),
		sample("b", "t2", 0, 1, Error),
	} {
		if err := s.PutReceipt(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AppendGovernorEvent(ctx, GovernorEvent{Kind: "preempt", ExecutionID: "e1", Trial: "a|t2|0"}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckClean(t *testing.T) {
	s, _ := openFrozen(t)
	fill(t, s)
	sum, err := s.Check(context.Background())
	if err != nil {
		t.Fatalf("clean store: %v", err)
	}
	if sum.Receipts != 5 || sum.Counted != 3 || sum.Executions != 1 || sum.Governor != 1 || sum.Audit != 2 {
		t.Errorf("summary = %+v", sum)
	}
}

// corrupt writes straight into the bbolt file, as a bug or a hand edit would.
func corrupt(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func TestCheckFindsProblems(t *testing.T) {
	tests := []struct {
		name string
		fn   func(tx *bolt.Tx) error
		want string
	}{
		{"undecodable receipt", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketReceipts).Bucket([]byte("e1")).Put([]byte("x|y|00000000|000001"), []byte("{not json"))
		}, "does not decode"},
		{"unknown field", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketReceipts).Bucket([]byte("e1")).Put(receiptKey(TrialKey{"a", "t1", 0}, 1), []byte(`{"schema_version":1,"surprise":1}`))
		}, "unknown field"},
		{"key does not match content", func(tx *bolt.Tx) error {
			raw, _ := sample("a", "t9", 0, 1, Preempted).withSchema().encode()
			return tx.Bucket(bucketReceipts).Bucket([]byte("e1")).Put(receiptKey(TrialKey{"a", "t8", 0}, 1), raw)
		}, "content says a|t9|0#1"},
		{"trial counted twice", func(tx *bolt.Tx) error {
			r := sample("a", "t1", 0, 2, Scored).withSchema()
			raw, _ := r.encode()
			return tx.Bucket(bucketReceipts).Bucket([]byte("e1")).Put(receiptKey(r.Trial(), 2), raw)
		}, "counted twice"},
		{"receipt of another study", func(tx *bolt.Tx) error {
			r := sample("c", "t1", 0, 1, Preempted).withSchema()
			r.StudyID = "s2"
			raw, _ := r.encode()
			return tx.Bucket(bucketReceipts).Bucket([]byte("e1")).Put(receiptKey(r.Trial(), 1), raw)
		}, `belongs to study "s2"`},
		{"receipts of unknown execution", func(tx *bolt.Tx) error {
			b, err := tx.Bucket(bucketReceipts).CreateBucket([]byte("e9"))
			if err != nil {
				return err
			}
			r := sample("c", "t1", 0, 1, Preempted).withSchema()
			r.ExecutionID = "e9"
			raw, _ := r.encode()
			return b.Put(receiptKey(r.Trial(), 1), raw)
		}, "receipts of e9: no such execution"},
		{"dangling counted index", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketCounted).Bucket([]byte("e1")).Put([]byte("z|z|00000000"), []byte("z|z|00000000|000001"))
		}, "is missing"},
		{"bad audit entry", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketAudit).Put(seqKey(99), []byte(`[]`))
		}, "audit"},
		{"execution parent missing", func(tx *bolt.Tx) error {
			e, _ := json.Marshal(Execution{ID: "e5", Parent: "gone", Attempt: 2, Status: Planned, DesignHash: testHash})
			return tx.Bucket(bucketExecutions).Put([]byte("e5"), e)
		}, `parent "gone" is missing`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, path := openFrozen(t)
			fill(t, s)
			s.Close()
			corrupt(t, path, tc.fn)
			s2, err := Open(path, "s1")
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			_, err = s2.Check(context.Background())
			var ie *IntegrityError
			if !errors.As(err, &ie) || !errors.Is(err, ErrIntegrity) {
				t.Fatalf("err = %v, want an IntegrityError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("problems %q do not mention %q", ie.Problems, tc.want)
			}
		})
	}
}

func (r Receipt) withSchema() Receipt {
	r.SchemaVersion = SchemaVersion
	return r
}

func TestOpenNewerSchemaRefused(t *testing.T) {
	s, path := openFrozen(t)
	s.Close()
	corrupt(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaSchema, []byte("99")) })
	if _, err := Open(path, "s1"); !errors.Is(err, ErrSchema) {
		t.Errorf("newer schema: err = %v, want ErrSchema", err)
	}
}

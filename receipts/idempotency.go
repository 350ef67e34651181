package receipts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

type idempotencyRecord struct {
	RequestHash string    `json:"request_hash"`
	RecordID    string    `json:"record_id"`
	At          time.Time `json:"at"`
}

// RequestHash is the sha256 of a request body as stored against an
// idempotency key. Callers hash the canonical form of the request.
func RequestHash(request []byte) string {
	sum := sha256.Sum256(request)
	return hex.EncodeToString(sum[:])
}

// LookupIdempotency reports the record created under key. found is false when
// the key is new. A key seen with a different request is a *ConflictError.
func (s *Store) LookupIdempotency(ctx context.Context, key string, request []byte) (recordID string, found bool, err error) {
	h := RequestHash(request)
	err = s.view(ctx, func(tx *bolt.Tx) error {
		var rec idempotencyRecord
		ok, err := getJSON(tx.Bucket(bucketIdempotency), []byte(key), &rec)
		if err != nil {
			return fmt.Errorf("%s: idempotency key %q: %w", s.path, key, err)
		}
		if !ok {
			return nil
		}
		if rec.RequestHash != h {
			return idemConflict(key, rec)
		}
		recordID, found = rec.RecordID, true
		return nil
	})
	return recordID, found, err
}

// ClaimIdempotency binds key to the request and the record it created, in one
// transaction. If the key is already bound to the same request it returns the
// existing record id with replay true; if bound to another request it returns
// a *ConflictError and writes nothing.
func (s *Store) ClaimIdempotency(ctx context.Context, key string, request []byte, recordID string) (existing string, replay bool, err error) {
	if strings.TrimSpace(key) == "" {
		return "", false, &FieldError{Record: "idempotency", Field: "key", Msg: "is empty", Fix: "send an idempotency key with create, run and decide"}
	}
	if strings.TrimSpace(recordID) == "" {
		return "", false, &FieldError{Record: "idempotency " + key, Field: "record id", Msg: "is empty", Fix: "bind the key to the record it created"}
	}
	h := RequestHash(request)
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketIdempotency)
		var rec idempotencyRecord
		ok, err := getJSON(b, []byte(key), &rec)
		if err != nil {
			return fmt.Errorf("%s: idempotency key %q: %w", s.path, key, err)
		}
		if ok {
			if rec.RequestHash != h {
				return idemConflict(key, rec)
			}
			existing, replay = rec.RecordID, true
			return nil
		}
		raw, err := json.Marshal(idempotencyRecord{RequestHash: h, RecordID: recordID, At: time.Now().UTC()})
		if err != nil {
			return err
		}
		existing = recordID
		return b.Put([]byte(key), raw)
	})
	if err != nil {
		return "", false, err
	}
	return existing, replay, nil
}

func idemConflict(key string, rec idempotencyRecord) error {
	return &ConflictError{What: "idempotency key", Key: key, Existing: "record " + rec.RecordID + ", request sha256 " + rec.RequestHash,
		Fix: "the key was used with another request; send a new key for a new request"}
}

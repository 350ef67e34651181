package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// PreflightRecord is a recorded fit verdict for one arm at one card profile.
// The verdict itself is opaque here; the preflight package owns its shape.
type PreflightRecord struct {
	Arm     string
	Profile string
	Verdict json.RawMessage
}

func preflightKey(arm, profile string) []byte { return []byte(arm + "|" + profile) }

// PutPreflight records the fit verdict of arm at profile. "Doesn't fit" is
// decided before any run and never revised mid-study, so a verdict is written
// once: the same verdict again is a no-op, a different one a *ConflictError.
func (s *Store) PutPreflight(ctx context.Context, arm, profile string, verdict json.RawMessage) error {
	if !validID(arm) || !validID(profile) {
		return &FieldError{Record: "preflight", Field: "arm/profile", Msg: fmt.Sprintf("%q / %q is not a valid pair of ids", arm, profile), Fix: "use the design's arm id and card profile name"}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, verdict); err != nil {
		return &FieldError{Record: "preflight " + arm + "|" + profile, Field: "verdict", Msg: "is not JSON: " + err.Error(), Fix: "pass the preflight verdict as JSON"}
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPreflight)
		k := preflightKey(arm, profile)
		if old := b.Get(k); old != nil {
			if bytes.Equal(old, compact.Bytes()) {
				return nil
			}
			return &ConflictError{What: "preflight verdict", Key: arm + "|" + profile,
				Fix: "a fit verdict is decided once before any run; a different profile is a different arm"}
		}
		return b.Put(k, compact.Bytes())
	})
}

// Preflight returns the recorded verdict of arm at profile, or ErrNotFound.
func (s *Store) Preflight(ctx context.Context, arm, profile string) (json.RawMessage, error) {
	var out json.RawMessage
	err := s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketPreflight).Get(preflightKey(arm, profile))
		if v == nil {
			return fmt.Errorf("preflight %s at %s: %w", arm, profile, ErrNotFound)
		}
		out = append(json.RawMessage(nil), v...)
		return nil
	})
	return out, err
}

// Preflights returns every recorded verdict, ordered by arm then profile.
func (s *Store) Preflights(ctx context.Context) ([]PreflightRecord, error) {
	var out []PreflightRecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPreflight).ForEach(func(k, v []byte) error {
			arm, profile, _ := strings.Cut(string(k), "|")
			out = append(out, PreflightRecord{Arm: arm, Profile: profile, Verdict: append(json.RawMessage(nil), v...)})
			return nil
		})
	})
	return out, err
}

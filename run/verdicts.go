package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"rig/preflight"
	"rig/receipts"
	"rig/studies"
)

// ErrVerdictUnreadable means a stored preflight verdict could not be read:
// the store failed, or the record does not decode to a verdict. What the
// preflight decided is then unknown, and nothing may be ranked on a guess.
var ErrVerdictUnreadable = errors.New("stored preflight verdict unreadable")

// PreflightReader reads stored preflight verdicts; *receipts.Store is one.
type PreflightReader interface {
	Preflight(ctx context.Context, arm, profile string) (json.RawMessage, error)
}

// ReadCardVerdicts reads the stored preflight verdict of every arm at its
// card. A verdict it cannot read is an error (wrapping ErrVerdictUnreadable
// and the cause) naming the arm and card, not an absent verdict: a caller
// that went on would rank, or run, a cell the preflight may have said does
// not fit. An arm with no verdict stored is absent.
func ReadCardVerdicts(ctx context.Context, st PreflightReader, d *studies.Design) (map[string]preflight.Verdict, error) {
	out := map[string]preflight.Verdict{}
	for _, a := range d.Arms {
		profile := studies.PreflightProfile(d, a).Name
		raw, err := st.Preflight(ctx, a.Name, profile)
		if errors.Is(err, receipts.ErrNotFound) || (err == nil && raw == nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: arm %s at card %s: %w", ErrVerdictUnreadable, a.Name, profile, err)
		}
		v, err := decodeVerdict(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: arm %s at card %s: %w", ErrVerdictUnreadable, a.Name, profile, err)
		}
		out[a.Name] = v
	}
	return out, nil
}

// decodeVerdict decodes a stored verdict and checks it says one thing: its
// outcome is one the preflight writes and agrees with its fits flag. A
// record that decodes to an empty verdict ("{}", "null") is not a verdict.
func decodeVerdict(raw json.RawMessage) (preflight.Verdict, error) {
	var v preflight.Verdict
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("does not decode: %w", err)
	}
	switch {
	case v.Outcome != preflight.OutcomeFits && v.Outcome != preflight.OutcomeDoesntFit:
		return v, fmt.Errorf("outcome %q is not one the preflight writes", v.Outcome)
	case v.Fits != (v.Outcome == preflight.OutcomeFits):
		return v, fmt.Errorf("outcome %q contradicts fits=%v", v.Outcome, v.Fits)
	}
	return v, nil
}

package analysis

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"rig/internal/jsonkeys"
)

// ComparisonHash is the SHA-256 of the canonical analysis inputs: the design
// with its defaults filled and the trials in a fixed order. A decision record
// cites it so that a decision made on other data is caught. The inputs are
// hashed as JSON with the field names they had when hashes were first
// recorded (legacyNames), so renaming a field's JSON does not make a
// recorded decision stale.
func ComparisonHash(in Input) (string, error) {
	c := struct {
		Design     Design      `json:"design"`
		Trials     []Trial     `json:"trials"`
		Sequential *Sequential `json:"sequential,omitempty"`
		// Fidelity is hashed when present (a fidelity_kl guardrail reads
		// it) and left out when absent, so a study without fidelity
		// records keeps the hash it had before they existed.
		Fidelity []FidelityKL `json:"fidelity,omitempty"`
	}{Design: in.Design.withDefaults(), Trials: slices.Clone(in.Trials), Sequential: in.Sequential, Fidelity: in.Fidelity}
	for i := range c.Trials {
		if c.Trials[i].Missing || c.Trials[i].Preempted {
			c.Trials[i].Score = 0 // unscored: whatever was stored there does not count
		}
		// The wording of an error is not data: a reworded message must not
		// make a recorded decision stale.
		c.Trials[i].Reason = ""
		// Nor is a reading of the output that only words a warning.
		c.Trials[i].RepeatsPrompt = false
		// Nor are the speed card's timings, which no rule reads (a guardrail
		// on one reads it from Metrics, which stays): a decision recorded
		// before they were carried stays current.
		c.Trials[i].PromptTokS, c.Trials[i].GenTokS, c.Trials[i].TTFTMS, c.Trials[i].TPOTMS = 0, 0, 0, 0
		// Nor where and how long the trial sat beside others on its
		// runtime: the cost those give is what the rule reads.
		c.Trials[i].Slots, c.Trials[i].StartMS, c.Trials[i].Tokens, c.Trials[i].OutputTokens = 0, 0, 0, 0
	}
	slices.SortStableFunc(c.Trials, func(a, b Trial) int {
		return cmp.Or(cmp.Compare(a.JobKind, b.JobKind), cmp.Compare(a.Arm, b.Arm), cmp.Compare(a.Task, b.Task), cmp.Compare(a.Repeat, b.Repeat), cmp.Compare(a.Score, b.Score), cmp.Compare(b2f(a.Pass), b2f(b.Pass)))
	})
	b, err := json.Marshal(c)
	if err == nil {
		b, err = jsonkeys.Rename(b, reflect.TypeOf(c), legacyName)
	}
	if err != nil {
		return "", fmt.Errorf("comparison hash: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// MinHashPrefix is the shortest prefix of a comparison hash CheckHash takes
// for the whole: the report's summary prints 12 characters.
const MinHashPrefix = 8

// CheckHash returns a StaleHashError when cited is neither the comparison
// hash of the current inputs nor a prefix of it of at least MinHashPrefix
// characters; `rig study decide` calls it before recording. With one current
// hash a prefix cannot be ambiguous.
func CheckHash(in Input, cited string) error {
	cur, err := ComparisonHash(in)
	if err != nil {
		return err
	}
	c := strings.ToLower(strings.TrimSpace(cited))
	if c == cur || (len(c) >= MinHashPrefix && strings.HasPrefix(cur, c)) {
		return nil
	}
	return &StaleHashError{Cited: cited, Current: cur}
}

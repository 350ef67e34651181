package analysis

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid classifies every input problem; the typed errors below wrap it so
// a caller can test either the class or the exact case.
var ErrInvalid = errors.New("invalid analysis input")

// UnknownArmError reports a named pair, rule or trial that cites an arm the
// design does not declare.
type UnknownArmError struct {
	Field string // e.g. "pairs[1].candidate"
	Arm   string
	Known []string
}

func (e *UnknownArmError) Error() string {
	return fmt.Sprintf("design: %s: arm %q is not declared (declared arms: %s; name one of them or add the arm to design.arms)",
		e.Field, e.Arm, strings.Join(e.Known, ", "))
}

func (e *UnknownArmError) Unwrap() error { return ErrInvalid }

// MixedDesignError reports trial results that come from more than one frozen
// design: numbers from two designs never share a denominator.
type MixedDesignError struct {
	Want   string         // the design hash being analysed
	Others map[string]int // foreign design hash -> number of trials
}

func (e *MixedDesignError) Error() string {
	var parts []string
	for _, h := range sortedKeys(e.Others) {
		parts = append(parts, fmt.Sprintf("%s (%d trials)", short(h), e.Others[h]))
	}
	return fmt.Sprintf("trials: results from other designs mixed in: %s; analysing design %s (analyse each study's own store separately)",
		strings.Join(parts, ", "), short(e.Want))
}

func (e *MixedDesignError) Unwrap() error { return ErrInvalid }

// StaleHashError reports a decision that cites a comparison hash other than
// the one the current inputs produce: the data changed after it was read.
type StaleHashError struct {
	Cited, Current string
	// Flag is how the user passed the hash, e.g. "--comparison"; the
	// message names it so the user knows what to change.
	Flag string
}

func (e *StaleHashError) Error() string {
	what := "the cited comparison hash"
	if e.Flag != "" {
		what = e.Flag
	}
	why := "is stale: the inputs changed since the report was read"
	if len(e.Cited) < MinHashPrefix && strings.HasPrefix(e.Current, strings.ToLower(e.Cited)) {
		why = fmt.Sprintf("is too short to cite: give at least %d hex characters", MinHashPrefix)
	}
	return fmt.Sprintf("decision: %s %s %s; the current comparison hash is %s (the report's summary shows it; cite it whole or its first %d or more characters)",
		what, e.Cited, why, e.Current, MinHashPrefix)
}

func (e *StaleHashError) Unwrap() error { return ErrInvalid }

// FieldError is any other invalid field, named with its path and the fix.
type FieldError struct {
	Field, Problem, Fix string
}

func (e *FieldError) Error() string {
	if e.Fix == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Problem)
	}
	return fmt.Sprintf("%s: %s (%s)", e.Field, e.Problem, e.Fix)
}

func (e *FieldError) Unwrap() error { return ErrInvalid }

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

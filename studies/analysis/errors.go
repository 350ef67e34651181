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
}

func (e *StaleHashError) Error() string {
	return fmt.Sprintf("decision: comparisonHash %s is stale; the current comparison is %s (re-read the report and cite its hash)",
		short(e.Cited), short(e.Current))
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

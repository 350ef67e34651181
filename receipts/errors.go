package receipts

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors; the typed errors below match them with errors.Is.
var (
	// ErrForeignStudy: the store belongs to another study.
	ErrForeignStudy = errors.New("store belongs to another study")
	// ErrConflict: the key is taken by a record with different content.
	ErrConflict = errors.New("conflicting record")
	// ErrNotFrozen: receipts need a frozen design to point at.
	ErrNotFrozen = errors.New("study is not frozen")
	// ErrNotFound: no such record.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: a record fails validation.
	ErrInvalid = errors.New("invalid record")
	// ErrStaleState: a transition's from-state is not the current state.
	ErrStaleState = errors.New("state changed since it was read")
	// ErrIntegrity: Check found a problem in the store.
	ErrIntegrity = errors.New("store integrity check failed")
	// ErrSchema: the store was written by a newer schema.
	ErrSchema = errors.New("unknown store schema version")
	// ErrLocked: another process holds the store open.
	ErrLocked = errors.New("store is locked by another process")
)

// ForeignStudyError is returned when a study writes into a store that is not
// its own. Records go only into the study's own store, never into another
// study's frozen store (seed spec §7).
type ForeignStudyError struct {
	Path   string
	Owner  string // the study the store belongs to
	Writer string // the study that tried to write
	Frozen bool   // whether the owner's design is frozen
}

func (e *ForeignStudyError) Error() string {
	state := "unfrozen"
	if e.Frozen {
		state = "frozen"
	}
	return fmt.Sprintf("%s: store of %s study %q refuses a write from study %q (each study writes only to its own store; open the writer's own store file)",
		e.Path, state, e.Owner, e.Writer)
}

// Is matches ErrForeignStudy.
func (e *ForeignStudyError) Is(target error) bool { return target == ErrForeignStudy }

// ConflictError is returned when a key is reused with different content: a
// receipt rewritten, an execution redefined, an idempotency key reused with
// another request.
type ConflictError struct {
	What     string // "receipt", "execution", "idempotency key", …
	Key      string
	Existing string // the record id or hash already stored
	Fix      string
}

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("%s %q already holds different content", e.What, e.Key)
	if e.Existing != "" {
		msg += " (existing: " + e.Existing + ")"
	}
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// FieldError names the field of a record that fails validation and the fix.
type FieldError struct {
	Record string // "receipt", "execution", …
	Field  string
	Msg    string
	Fix    string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %s: %s (%s)", e.Record, e.Field, e.Msg, e.Fix)
}

// Is matches ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// IntegrityError lists every problem Check found.
type IntegrityError struct {
	Path     string
	Problems []string
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("%s: integrity check found %d problem(s):\n  %s", e.Path, len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// Is matches ErrIntegrity.
func (e *IntegrityError) Is(target error) bool { return target == ErrIntegrity }

package tasks

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors a caller (the freeze, the CLI) classifies with errors.Is.
var (
	// ErrNotAudited means no audit record exists for the bank version.
	ErrNotAudited = errors.New("bank not audited")
	// ErrBankChanged means the bank's bytes differ from the audited hash.
	ErrBankChanged = errors.New("bank changed after its audit")
	// ErrHoldoutLocked means a decided study used the bank version.
	ErrHoldoutLocked = errors.New("hold-out flags locked")
	// ErrUnknownGrader means no grader is registered under a name/version.
	ErrUnknownGrader = errors.New("unknown grader")
	// ErrKeyFailed means a key does not pass its own grader.
	ErrKeyFailed = errors.New("key fails its own grader")
	// ErrDuplicateTask means two tasks of a bank have the same normalized prompt.
	ErrDuplicateTask = errors.New("duplicate task")
	// ErrLeak means a task or key appears in a place a candidate sees.
	ErrLeak = errors.New("task leakage")
	// ErrIdentity means a judge prompt names a model, arm or registry id.
	ErrIdentity = errors.New("identity in blind text")
)

// ParseError points at one line and field of a bank file and says the fix.
type ParseError struct {
	File  string
	Line  int
	Field string
	Msg   string
	Fix   string
	Err   error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d", e.File, e.Line)
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %s", e.Msg)
	if e.Fix != "" {
		fmt.Fprintf(&b, " (%s)", e.Fix)
	}
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

// MaxReported is the most problems a *BankError shows: enough to fix a
// bank in one edit, too few for a hostile file to flood a terminal or a
// log with one line per line of the file.
const MaxReported = 50

// BankError is every problem found in a bank file, so one edit fixes them
// all; the bank is refused whole. It keeps the first MaxReported problems
// and counts the rest.
type BankError struct {
	File     string
	Problems []*ParseError // the first MaxReported, in file order
	Count    int           // every problem found, shown or not
}

func (e *BankError) add(err error) {
	e.Count++
	if len(e.Problems) >= MaxReported {
		return
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		pe = &ParseError{File: e.File, Msg: err.Error(), Err: err}
	}
	e.Problems = append(e.Problems, pe)
}

func (e *BankError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	if more := e.Count - len(e.Problems); more > 0 {
		lines = append(lines, fmt.Sprintf("%s: %d more problems not shown (fix these, then run `rig tasks lint %s` again)", e.File, more, e.File))
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives the problems to errors.As and errors.Is: the first
// *ParseError found is the first problem in the file.
func (e *BankError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// AuditError is returned by CheckAudited; it wraps ErrNotAudited or
// ErrBankChanged so a freeze can refuse with errors.Is.
type AuditError struct {
	File     string
	Recorded string // hash in the audit record, empty when none
	Current  string
	Err      error
}

func (e *AuditError) Error() string {
	if errors.Is(e.Err, ErrNotAudited) {
		return fmt.Sprintf("%s: no audit record for hash %s (run `rig tasks audit %s` before freezing)", e.File, short(e.Current), e.File)
	}
	return fmt.Sprintf("%s: bank hash %s differs from the audited %s (the bank was edited after its audit; re-run `rig tasks audit %s` and bump bank_version)", e.File, short(e.Current), short(e.Recorded), e.File)
}

func (e *AuditError) Unwrap() error { return e.Err }

// HoldoutLockedError names the bank version and the study that used it.
type HoldoutLockedError struct {
	File        string
	BankVersion string
	Study       string
}

func (e *HoldoutLockedError) Error() string {
	return fmt.Sprintf("%s: bank_version %q was used by decided study %q; its hold-out flags cannot be flipped in place (copy the bank under a new bank_version and flip there)", e.File, e.BankVersion, e.Study)
}

func (e *HoldoutLockedError) Unwrap() error { return ErrHoldoutLocked }

// UnknownGraderError names the grader reference that has no registration.
type UnknownGraderError struct {
	Name    string
	Version int
	Known   []string
}

func (e *UnknownGraderError) Error() string {
	return fmt.Sprintf("grader %s@v%d is not registered (known: %s)", e.Name, e.Version, strings.Join(e.Known, ", "))
}

func (e *UnknownGraderError) Unwrap() error { return ErrUnknownGrader }

// KeyFailure is one task whose key did not pass its grader.
type KeyFailure struct {
	TaskID string `json:"task_id"`
	Reason string `json:"reason"`
}

// KeyFailedError lists every key that failed during an audit.
type KeyFailedError struct {
	File     string
	Failures []KeyFailure
}

func (e *KeyFailedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d key(s) fail their own grader (fix the key or the task, then audit again; no audit record written)", e.File, len(e.Failures))
	for _, f := range e.Failures {
		fmt.Fprintf(&b, "\n  %s: %s", f.TaskID, f.Reason)
	}
	return b.String()
}

func (e *KeyFailedError) Unwrap() error { return ErrKeyFailed }

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

package licences

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every *ParseError, so a caller can tell a
// bad registry or item list from an I/O failure.
var ErrInvalid = errors.New("invalid licence data")

// ErrBlocked is matched by the error a check returns when the design may not be
// registered.
var ErrBlocked = errors.New("licence check blocks the design")

// ParseError names the file, the field and the fix, so a user can repair the
// file without reading the code.
type ParseError struct {
	File  string // the file as the user named it
	Field string // a path such as entries[2].verdicts.distillation.reading
	Msg   string // what is wrong
	Fix   string // what to do about it
	Err   error  // the cause, when there is one to classify (textcheck.ErrInvalidUTF8)
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Fix != "" {
		fmt.Fprintf(&b, " (%s)", e.Fix)
	}
	return b.String()
}

// Is lets errors.Is(err, ErrInvalid) match any ParseError.
func (e *ParseError) Is(target error) bool { return target == ErrInvalid }

// Unwrap is the cause, or nil.
func (e *ParseError) Unwrap() error { return e.Err }

// BlockedError lists every item that blocks a design, so one run of the check
// shows all the work to do rather than the first problem only.
type BlockedError struct {
	Blocks []Block
}

func (e *BlockedError) Error() string {
	lines := make([]string, 0, len(e.Blocks)+1)
	lines = append(lines, fmt.Sprintf("licence check: %d item(s) block the design", len(e.Blocks)))
	for _, b := range e.Blocks {
		lines = append(lines, "  "+b.String())
	}
	return strings.Join(lines, "\n")
}

// Is lets errors.Is(err, ErrBlocked) match a BlockedError.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

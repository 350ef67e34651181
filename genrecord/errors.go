package genrecord

import (
	"errors"
	"fmt"
)

// Sentinel errors, wrapped by LineError and TornLineError so a caller can
// classify a failure with errors.Is while the message still names the line.
var (
	ErrNoHeader     = errors.New("no header line")
	ErrBadType      = errors.New("a field holds the wrong JSON type")
	ErrPinsMissing  = errors.New("header pins missing")
	ErrBadRow       = errors.New("invalid row")
	ErrWrongK       = errors.New("top-K list does not match k")
	ErrTokenCount   = errors.New("step count does not match the runtime's token count")
	ErrDuplicateRow = errors.New("duplicate row_id")
	ErrTornLine     = errors.New("torn last line")
	ErrSumMismatch  = errors.New("record sha256 does not match")
	ErrPinsDiffer   = errors.New("pins differ from the record's header")
	ErrWriterBroken = errors.New("writer is broken after a failed write")
)

// LineError is a problem with one line of a record. Line is 1-based; Field
// is a JSON path inside the line ("output[3].top") or empty.
type LineError struct {
	Path  string
	Line  int
	Field string
	Err   error
}

func (e *LineError) Error() string {
	name := e.Path
	if name == "" {
		name = "generations.jsonl"
	}
	if e.Field != "" {
		return fmt.Sprintf("%s:%d: %s: %v", name, e.Line, e.Field, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", name, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// TornLineError reports a last line that has no terminating newline: the
// writer was cut off mid-line (crash, power loss, full disk). The complete
// lines before it are intact; the torn bytes are not a row.
type TornLineError struct {
	Path   string
	Line   int
	Offset int64 // byte offset where the torn line starts
	Bytes  int   // length of the torn fragment
}

func (e *TornLineError) Error() string {
	name := e.Path
	if name == "" {
		name = "generations.jsonl"
	}
	return fmt.Sprintf("%s:%d: torn last line (%d bytes at offset %d with no newline; the writer was cut off mid-line, the %d lines before it are intact; run Salvage to move the fragment aside before appending)",
		name, e.Line, e.Bytes, e.Offset, e.Line-1)
}

// Is makes errors.Is(err, ErrTornLine) true.
func (e *TornLineError) Is(target error) bool { return target == ErrTornLine }

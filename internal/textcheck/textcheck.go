// Package textcheck is the one check that a user's text file is UTF-8,
// run on the raw bytes before any decoder sees them: encoding/json replaces
// an invalid byte with U+FFFD without a word, so a bank prompt with a stray
// Latin-1 byte would be hashed and graded as another text.
package textcheck

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrInvalidUTF8 is wrapped by every *Error, so a caller classifies the
// failure with errors.Is through whatever error its parser wraps it in.
var ErrInvalidUTF8 = errors.New("invalid UTF-8")

// Fix is what the user does about it.
const Fix = "save the file as UTF-8"

// Error is the first byte of a file that is not UTF-8.
type Error struct {
	File   string
	Line   int   // 1-based
	Col    int   // 1-based byte column within the line
	Offset int64 // 0-based byte offset within the file
	Byte   byte  // the first byte of the invalid sequence
}

// Error names the file, the line, the column, the offset and the fix.
func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason())
}

// Reason is the message less "FILE:LINE: ", for a parser whose own error
// type names the file and the line already.
func (e *Error) Reason() string {
	return fmt.Sprintf("invalid UTF-8 at column %d (byte 0x%02x at byte offset %d of the file); %s", e.Col, e.Byte, e.Offset, Fix)
}

// Unwrap makes errors.Is(err, ErrInvalidUTF8) true.
func (e *Error) Unwrap() error { return ErrInvalidUTF8 }

// Unlocated is e with the message Reason gives, for a parser that wraps an
// error under its own "FILE:LINE: " prefix; errors.As still finds e.
func (e *Error) Unlocated() error { return unlocated{e} }

type unlocated struct{ e *Error }

func (u unlocated) Error() string { return u.e.Reason() }
func (u unlocated) Unwrap() error { return u.e }

// UTF8 checks a whole file's bytes; file names it in the error.
func UTF8(file string, data []byte) error { return UTF8At(file, data, 1, 0) }

// UTF8At checks a piece of a file read line by line: data starts at line
// line (1-based) and byte offset offset of the file. A newline byte never
// occurs inside a multi-byte sequence, so checking each line alone is
// checking the file.
func UTF8At(file string, data []byte, line int, offset int64) error {
	if utf8.Valid(data) {
		return nil
	}
	lineStart := 0
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			if c == '\n' {
				line++
				lineStart = i + 1
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return &Error{File: file, Line: line, Col: i - lineStart + 1, Offset: offset + int64(i), Byte: c}
		}
		i += n
	}
	return nil // unreachable: utf8.Valid said there is a bad byte
}

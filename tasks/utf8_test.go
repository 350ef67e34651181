package tasks

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"rig/internal/textcheck"
)

// A bank prompt with a byte that is not UTF-8 is refused with its line and
// offset, not decoded to U+FFFD and hashed as another text.
func TestLoadBankInvalidUTF8(t *testing.T) {
	bad := strings.Replace(testTask("b"), "2+2", "2\xff2", 1)
	file := writeBank(t, testHeader, testTask("a"), bad)
	_, err := LoadBank(file)
	if !errors.Is(err, textcheck.ErrInvalidUTF8) {
		t.Fatalf("err = %v, want ErrInvalidUTF8", err)
	}
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 3 {
		t.Fatalf("err = %v, want a ParseError on line 3", err)
	}
	col := strings.IndexByte(bad, 0xff)
	off := len(testHeader) + 1 + len(testTask("a")) + 1 + col
	for _, want := range []string{file + ":3:", fmt.Sprintf("column %d", col+1), fmt.Sprintf("byte offset %d", off), "save the file as UTF-8"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

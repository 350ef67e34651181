package genrecord

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/textcheck"
)

// A record line that is not UTF-8 is a LineError naming the line and the file
// offset; the rows after it still read.
func TestReadInvalidUTF8(t *testing.T) {
	data := goodRecord(t, 3)
	start := 0
	for range 2 {
		start += bytes.IndexByte(data[start:], '\n') + 1
	}
	off := start + 2 // the k of {"kind" on line 3
	data[off] = 0xff
	path := filepath.Join(t.TempDir(), "generations.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rd, err := OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if _, err := rd.Next(); err != nil {
		t.Fatalf("line 2: %v", err)
	}
	_, err = rd.Next()
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !errors.Is(err, textcheck.ErrInvalidUTF8) || !errors.Is(err, ErrBadRow) {
		t.Fatalf("line 3: err = %v, want a LineError on line 3 wrapping ErrInvalidUTF8", err)
	}
	for _, want := range []string{path + ":3:", "column 3", fmt.Sprintf("byte offset %d", off), "save the file as UTF-8"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if strings.Count(err.Error(), path) != 1 {
		t.Errorf("%q names the file more than once", err)
	}
	if _, err := rd.Next(); err != nil {
		t.Fatalf("line 4: %v", err)
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}

	// A header that is not UTF-8 is refused on line 1.
	head := goodRecord(t, 1)
	head[5] = 0xc3
	_, err = NewReader(bytes.NewReader(head), "g.jsonl")
	if !errors.As(err, &le) || le.Line != 1 || !errors.Is(err, textcheck.ErrInvalidUTF8) || !errors.Is(err, ErrNoHeader) {
		t.Fatalf("header: err = %v", err)
	}
}

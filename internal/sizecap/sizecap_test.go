package sizecap

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var small = Cap{What: "test file", Limit: 16, Fix: "make it shorter"}

func TestReadFileRefusesBeforeReading(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte("sixteen bytes!!!"), 0o644)
	if b, err := small.ReadFile(ok); err != nil || string(b) != "sixteen bytes!!!" {
		t.Fatalf("a file at the cap: %q %v", b, err)
	}
	big := filepath.Join(dir, "big")
	f, _ := os.Create(big)
	f.Truncate(1 << 40) // a sparse terabyte: read, it would never end
	f.Close()
	_, err := small.ReadFile(big)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrTooLarge) || !e.Exact || e.Size != 1<<40 {
		t.Fatalf("want an exact *Error from Stat, got %v", err)
	}
	for _, want := range []string{big, "test file", "1024 GiB", "16 bytes", "make it shorter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the message lacks %q: %v", want, err)
		}
	}
}

func TestReadStopsPastTheCap(t *testing.T) {
	// A reader with no size (a pipe): the read stops one byte past the cap.
	r := io.LimitReader(zeros{}, 1<<30)
	_, err := small.Read(r, "pipe")
	var e *Error
	if !errors.As(err, &e) || e.Exact || e.Size != 17 {
		t.Fatalf("want a cut-off *Error at 17 bytes, got %v", err)
	}
	if !strings.Contains(err.Error(), "more than 16 bytes") {
		t.Errorf("a cut-off read cannot say the whole size: %v", err)
	}
}

func TestReadLineCapsOneLine(t *testing.T) {
	in := "short\n" + strings.Repeat("x", 100) + "\nlast"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	line, err := small.ReadLine(br, "f.jsonl", 1)
	if err != nil || string(line) != "short\n" {
		t.Fatalf("first line: %q %v", line, err)
	}
	_, err = small.ReadLine(br, "f.jsonl", 2)
	var e *Error
	if !errors.As(err, &e) || e.Line != 2 || !strings.Contains(err.Error(), "f.jsonl: line 2") {
		t.Fatalf("want line 2 refused, got %v", err)
	}
	br = bufio.NewReader(strings.NewReader("end"))
	if line, err := small.ReadLine(br, "f", 1); string(line) != "end" || err != io.EOF {
		t.Fatalf("a last line without a newline: %q %v", line, err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

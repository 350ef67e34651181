package tasks

import (
	"strings"
	"testing"
)

// TestTailWriterKeepsOnlyTheEnd: a test command that prints without end
// leaves rig holding its last bytes only.
func TestTailWriterKeepsOnlyTheEnd(t *testing.T) {
	w := &tailWriter{max: 10}
	for i := 0; i < 1000; i++ {
		if _, err := w.Write([]byte("0123456789abc")); err != nil {
			t.Fatal(err)
		}
		if len(w.Bytes()) > 10 || cap(w.buf) > 64 {
			t.Fatalf("the tail holds %d bytes (capacity %d) after %d writes", len(w.Bytes()), cap(w.buf), i+1)
		}
	}
	_, _ = w.Write([]byte("xy"))
	if got := string(w.Bytes()); got != "56789abcxy" {
		t.Errorf("the tail reads %q, want the last 10 bytes %q", got, "56789abcxy")
	}
	w = &tailWriter{max: 4}
	_, _ = w.Write([]byte(strings.Repeat("a", 100) + "bcde"))
	if got := string(w.Bytes()); got != "bcde" {
		t.Errorf("one long write leaves %q, want %q", got, "bcde")
	}
}

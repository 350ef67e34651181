package daemon

import (
	"bytes"
	"testing"
)

// The activity is the last complete line a request wrote, its padding
// folded, whatever the writes' boundaries; the text passes on unchanged.
func TestActivityWriterKeepsTheLastLine(t *testing.T) {
	var a activities
	var out bytes.Buffer
	w := &activityWriter{w: &out, a: &a, study: "s"}
	text := "validation llama-server     arm smollm2   running (one task) ...\nvalidation llama-server     arm smollm2   pass=true\nvalidation ollama  arm gemma3  run"
	for i := 0; i < len(text); i += 7 {
		w.Write([]byte(text[i:min(i+7, len(text))]))
	}
	if got, want := a.get("s"), "validation llama-server arm smollm2 pass=true"; got != want {
		t.Errorf("activity %q, want %q", got, want)
	}
	w.Write([]byte("ning (one task) ...\n"))
	if got, want := a.get("s"), "validation ollama arm gemma3 running (one task) ..."; got != want {
		t.Errorf("activity %q, want %q", got, want)
	}
	if out.String() != text+"ning (one task) ...\n" {
		t.Errorf("text changed on its way: %q", out.String())
	}
	a.set("s", "")
	if got := a.get("s"); got != "" {
		t.Errorf("activity %q after it ended, want none", got)
	}
}

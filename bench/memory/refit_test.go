package memory

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"rig/preflight"
)

// A table the bench wrote reads back row for row, with each row's prompt;
// a longer prompt at the same context is its own configuration, never a
// repeat of the short one (Ollama's engine reads a higher peak as the
// context fills, which is no run-to-run spread).
func TestReadTableRoundTripsAndKeepsPromptsApart(t *testing.T) {
	cal := mustCal(t)
	short := Row{Model: "m", Runtime: preflight.RuntimeOllama, Context: 8192, KV: "f16", Measured: 600 * preflight.MiB, Rig: 610 * preflight.MiB, PromptSentences: benchSentences(8192), Repeat: 1}
	again := short
	again.Repeat, again.Measured = 2, 612*preflight.MiB
	full := short
	full.Repeat, full.Measured, full.PromptSentences = 0, 660*preflight.MiB, 700
	path := filepath.Join(t.TempDir(), "table.md")
	if err := os.WriteFile(path, []byte(benchTable([]Row{short, again, full}, cal, "m")), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := readTable(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 3 || back[2].PromptSentences != 700 || back[0].PromptSentences != 120 || math.Abs(back[1].Measured.MiBf()-612) > 0.05 {
		t.Fatalf("read back %+v, want three rows: 120, 120 and 700 sentences, the second at 612 MiB", back)
	}
	back[0].Repeat, back[1].Repeat = 1, 2
	if s := repeatSpread(back); math.Abs(s-12.0/606) > 1e-3 {
		t.Errorf("repeat spread %.4f, want %.4f: the full-context row was counted as a repeat", s, 12.0/606)
	}
}

func TestReadTableRejectsBadRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "table.md")
	body := "| model | runtime | ctx | kv | measured MiB | rig MiB | rig err | gguf-parser MiB | parser err | own MiB | own err | logged | prompt sentences |\n" +
		"| m | ollama | 8k | f16 | 600 | 610 | +1% | 0 | | 0 | | 0/0/0 | 120 |\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readTable(path); err == nil {
		t.Fatal("a row with context 8k was read")
	}
}

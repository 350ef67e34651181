package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// bench replay refuses a runtime it does not know before it generates
// anything, naming the three choices.
func TestBenchReplayRefusesAnUnknownRuntime(t *testing.T) {
	_, err := runRig(t, "bench", "replay", "--runtime", "vllm")
	if want := `bench replay: --runtime "vllm": want llama-server, ollama or both`; err == nil || err.Error() != want {
		t.Errorf("bench replay --runtime vllm = %v; want %q", err, want)
	}
	for runtime, want := range map[string][]string{"both": {"llama-server", "ollama"}, "ollama": {"ollama"}} {
		if got, err := replayRuntimes("bench replay", runtime); err != nil || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("replayRuntimes(%q) = %v, %v; want %v", runtime, got, err, want)
		}
	}
}

type fakeBenchResult struct {
	Ratio float64 `json:"ratio"`
}

func (r fakeBenchResult) WriteText(w io.Writer) error {
	_, err := io.WriteString(w, "ratio 1.1\n")
	return err
}

// A bench's result prints as its table or, with --json, as JSON; a missed
// goal is the command's error, after the result is printed.
func TestPrintBench(t *testing.T) {
	var b bytes.Buffer
	if err := printBench(&b, "bench replay", fakeBenchResult{Ratio: 1.1}, true, false); err != nil || b.String() != "ratio 1.1\n" {
		t.Errorf("text: %q, %v", b.String(), err)
	}
	b.Reset()
	err := printBench(&b, "bench replay", fakeBenchResult{Ratio: 1.6}, false, true)
	if err == nil || err.Error() != "bench replay: a goal was missed" {
		t.Errorf("a missed goal = %v", err)
	}
	var got fakeBenchResult
	if jerr := json.Unmarshal(b.Bytes(), &got); jerr != nil || got.Ratio != 1.6 {
		t.Errorf("--json printed %q (%v)", b.String(), jerr)
	}
}

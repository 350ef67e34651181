package speed

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"rig/internal/provision"
)

func TestStatOf(t *testing.T) {
	s := statOf([]float64{10, 12, 14})
	if s.Mean != 12 || math.Abs(s.SD-2) > 1e-12 || s.N != 3 {
		t.Fatalf("statOf(10,12,14) = %+v, want mean 12, sd 2 (sample), n 3", s)
	}
	if s := statOf([]float64{5}); s.Mean != 5 || s.SD != 0 {
		t.Fatalf("one value: %+v", s)
	}
}

func TestPercentilesOf(t *testing.T) {
	p := percentilesOf([]float64{30, 10, 20})
	if p.P50 != 20 || p.P99 != 30 {
		t.Fatalf("percentiles of 10,20,30 = %+v, want p50 20, p99 30 (nearest rank)", p)
	}
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	if p := percentilesOf(xs); p.P50 != 100 || p.P99 != 198 {
		t.Fatalf("percentiles of 1..200 = %+v, want p50 100, p99 198", p)
	}
}

// TestCallCheck holds each call's runtime times to its wall time.
func TestCallCheck(t *testing.T) {
	ok := Call{Kind: "tg", PromptTokens: 20, OutputTokens: 128, PromptTime: 50 * time.Millisecond, OutputTime: 2 * time.Second, Wall: 2100 * time.Millisecond}
	if err := ok.check(); err != nil {
		t.Fatalf("a call whose times fit its wall: %v", err)
	}
	for name, c := range map[string]Call{
		"times above the wall": {Kind: "tg", PromptTokens: 20, OutputTokens: 128, PromptTime: time.Second, OutputTime: 2 * time.Second, Wall: 2 * time.Second},
		"no output time":       {Kind: "tg", PromptTokens: 20, OutputTokens: 128, PromptTime: time.Millisecond, Wall: time.Second},
		"no prompt tokens":     {Kind: "pp", PromptTime: time.Millisecond, Wall: time.Second},
	} {
		if err := c.check(); !errors.Is(err, errTiming) {
			t.Errorf("%s: err = %v, want errTiming", name, err)
		}
	}
}

// TestSummarize turns calls into rates, latencies and the timing coverage.
func TestSummarize(t *testing.T) {
	r := Row{Calls: []Call{
		{Kind: "pp", PromptTokens: 512, PromptTime: 1 * time.Second, Wall: 1250 * time.Millisecond, PeakMemory: 100},
		{Kind: "tg", PromptTokens: 10, OutputTokens: 128, PromptTime: 10 * time.Millisecond, OutputTime: 2 * time.Second, Wall: 2020 * time.Millisecond, PeakMemory: 300},
		{Kind: "pp", PromptTokens: 512, PromptTime: 2 * time.Second, Wall: 2 * time.Second, PeakMemory: 200},
		{Kind: "tg", PromptTokens: 10, OutputTokens: 64, PromptTime: 10 * time.Millisecond, OutputTime: 2 * time.Second, Wall: 2010 * time.Millisecond},
	}}
	r.summarize()
	if r.PP.Mean != 384 || r.TG.Mean != 48 {
		t.Fatalf("pp mean %v (want (512+256)/2 = 384), tg mean %v (want (64+32)/2 = 48)", r.PP.Mean, r.TG.Mean)
	}
	if r.TTFT.P50 != 1250 || r.TTFT.P99 != 2000 || r.TPOT.P99 != 31.25 {
		t.Fatalf("TTFT %+v (want 1250/2000 ms), TPOT %+v (want p99 2000/64 = 31.25 ms)", r.TTFT, r.TPOT)
	}
	if r.PeakMemory != 300 || r.Coverage[0] != 0.8 || r.Coverage[1] != 1 {
		t.Fatalf("peak %d (want 300), coverage %v (want 0.8–1)", r.PeakMemory, r.Coverage)
	}
}

// TestWriteText prints a fake result (made here, not measured): every row,
// the ratios against the goals and the CPU backend of each build.
func TestWriteText(t *testing.T) {
	res := Result{Date: "2026-12-03", Machine: "fake machine", PromptTokens: 512, GenTokens: 128, Context: 2048, Reps: 3,
		Builds: []Build{{Runtime: "llama-server", Version: "b1", BuildFlags: "-DGGML_AVX2=ON", WeightRepack: "off"}, {Runtime: "ollama", Version: "0.17.4"}},
		Cells: []Cell{{Model: "smollm2-135m-instruct", Quant: "Q4_1", Threads: 1,
			Rows:   []Row{{Runtime: "llama-server", PP: Stat{Mean: 300, SD: 3}}, {Runtime: "ollama", PP: Stat{Mean: 150}}},
			Ratios: []Ratio{{Runtime: "ollama", PP: 0.5, TG: 0.9}}}}}
	var b strings.Builder
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"300.0 ± 3.0", "0.50×", "MISSED", "weight repack: off", "CPU backend: its log named none", "fake machine"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestRunNeedsLlamaServer: llama-server is the reference and sizes the
// prompts; a bench without it is refused before anything starts.
func TestRunNeedsLlamaServer(t *testing.T) {
	_, err := Run(context.Background(), Request{Runtimes: []string{"ollama"}})
	if err == nil || !strings.Contains(err.Error(), "llama-server must be among them") {
		t.Fatalf("err = %v", err)
	}
}

// TestRunOnRealRuntimes runs a small bench on the real runtimes and the
// bundled SmolLM2: both read the same prompt (the same token count), make
// tokens, and their own times fit inside each call.
func TestRunOnRealRuntimes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real runtimes (run without -short)")
	}
	in, err := provision.Load()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Request{Installed: in, Models: []string{"smollm2-135m-instruct"}, Threads: []int{1}, Reps: 2,
		PromptTokens: 128, GenTokens: 32, Context: 512, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	t.Log(b.String())
	c := res.Cells[0]
	if len(c.Rows) != 2 || len(c.Ratios) != 1 {
		t.Fatalf("rows %d, ratios %d: want llama-server and ollama, one ratio", len(c.Rows), len(c.Ratios))
	}
	for _, row := range c.Rows {
		if row.PP.Mean <= 0 || row.TG.Mean <= 0 || row.Coverage[1] > 1.01 || row.PeakMemory <= 0 {
			t.Errorf("%s: pp %v, tg %v, coverage %v, peak %d", row.Runtime, row.PP, row.TG, row.Coverage, row.PeakMemory)
		}
		for _, call := range row.Calls {
			// Ollama may keep the BOS of the last prompt in its cache.
			if call.Kind == "pp" && (call.PromptTokens < 127 || call.PromptTokens > 128) {
				t.Errorf("%s read %d prompt tokens, the prompt is 128", row.Runtime, call.PromptTokens)
			}
		}
	}
	if len(res.Builds) != 2 || res.Builds[1].CPU == nil || res.Builds[0].CPU == nil {
		t.Fatalf("builds %+v: want both, each with the CPU backend it loaded", res.Builds)
	}
}

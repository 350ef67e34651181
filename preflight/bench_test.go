package preflight

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseBuffers(t *testing.T) {
	log := `llama_model_load_from_file_impl: using device CPU
load_tensors:          CPU model buffer size =   100.50 MiB
llama_kv_cache:        CPU KV buffer size =    60.00 MiB
llama_kv_cache:        CPU KV buffer size =     4.00 MiB
llama_context:        CPU  output buffer size =     0.19 MiB
sched_reserve:        CPU compute buffer size =   300.25 MiB`
	b := parseBuffers(log)
	if b.Model != Size(100.5*float64(MiB)) || b.KV != 64*MiB || b.Compute != Size(300.25*float64(MiB)) || b.Output == 0 {
		t.Errorf("parsed %+v", b)
	}
}

func TestLoadInstalled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "installed.env")
	body := "# provisioned\nLLAMA_SERVER_BIN=/x/llama-server\nexport SMOLLM2_GGUF=\"/m/smol.gguf\"\n\nGEMMA3_GGUF='/m/g.gguf'\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadInstalled(path)
	if err != nil {
		t.Fatal(err)
	}
	if m["LLAMA_SERVER_BIN"] != "/x/llama-server" || m["SMOLLM2_GGUF"] != "/m/smol.gguf" || m["GEMMA3_GGUF"] != "/m/g.gguf" {
		t.Errorf("parsed %v", m)
	}
}

// syntheticRows are measurements of a runtime whose overhead is exactly
// base + perVocab × vocabulary, with ±2 MB of noise.
func syntheticRows(rt string, base, perVocab float64) []BenchRow {
	var rows []BenchRow
	for _, v := range []int{49152, 262144} {
		for i, parts := range []Size{300 * MiB, 500 * MiB, 900 * MiB} {
			noise := float64(i-1) * 2e6
			rows = append(rows, BenchRow{Runtime: rt, vocab: v, parts: parts, Measured: Size(float64(parts) + base + perVocab*float64(v) + noise)})
		}
	}
	return rows
}

func TestFitCalibrationRecoversOverhead(t *testing.T) {
	cases := []struct {
		rt             string
		base, perVocab float64
	}{
		{RuntimeLlamaServer, 80e6, 120},
		{RuntimeOllama, 210e6, 310},
	}
	var rows []BenchRow
	for _, c := range cases {
		rows = append(rows, syntheticRows(c.rt, c.base, c.perVocab)...)
	}
	cal := mustCal(t)
	before := maps.Clone(cal.Runtimes)
	got, err := fitCalibration(cal, rows, "test machine")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		rc := got.Runtimes[c.rt]
		if math.Abs(rc.BaseBytes-c.base) > 5e6 || math.Abs(rc.PerVocabBytes-c.perVocab) > 20 {
			t.Errorf("%s: fitted base %.0f per-vocab %.1f; want about %.0f and %.0f", c.rt, rc.BaseBytes, rc.PerVocabBytes, c.base, c.perVocab)
		}
		if rc.RelError < 0.03 || rc.RelError > 0.05 || rc.Runs != 6 {
			t.Errorf("%s: relative error %.3f runs %d", c.rt, rc.RelError, rc.Runs)
		}
	}
	if got.Machine != "test machine" || !maps.Equal(cal.Runtimes, before) {
		t.Errorf("fit must copy, not edit, the input calibration")
	}
}

func TestFitCalibrationCountsTheRepeatSpread(t *testing.T) {
	cal := mustCal(t)
	once, err := fitCalibration(cal, syntheticRows(RuntimeOllama, 60e6, 40), "m")
	if err != nil {
		t.Fatal(err)
	}
	// The same six configurations measured twice: the second run of each
	// lands 6% higher, as a peak can between runs.
	var rows []BenchRow
	for _, r := range syntheticRows(RuntimeOllama, 60e6, 40) {
		first, second := r, r
		first.Model, second.Model = fmt.Sprint(r.vocab), fmt.Sprint(r.vocab)
		first.Context, second.Context = int(r.parts/MiB), int(r.parts/MiB)
		first.Repeat, second.Repeat = 1, 2
		second.Measured = Size(float64(r.Measured) * 1.06)
		rows = append(rows, first, second)
	}
	twice, err := fitCalibration(cal, rows, "m")
	if err != nil {
		t.Fatal(err)
	}
	o, r := once.Runtimes[RuntimeOllama], twice.Runtimes[RuntimeOllama]
	if o.RepeatSpread != 0 || r.RepeatSpread < 0.055 || r.RepeatSpread > 0.065 || r.Runs != 12 {
		t.Errorf("repeat spread: one run each %.3f, two runs each %.3f over %d runs; want 0 and about 0.058", o.RepeatSpread, r.RepeatSpread, r.Runs)
	}
	// The fit sits between the two runs, so its own worst error is about 3%;
	// the claimed error adds the 6% spread a single later run can land in.
	if r.RelError < o.RelError+0.05 {
		t.Errorf("relative error with repeats %.2f, without %.2f: the spread between repeats was not counted", r.RelError, o.RelError)
	}
	if got := benchTable(rows, twice, "m"); !strings.Contains(got, "widest spread between repeats of one configuration 5.8%") {
		t.Errorf("the table does not report the spread:\n%s", got)
	}
}

func TestFitCalibrationKeepsUnmeasuredRuntime(t *testing.T) {
	cal := mustCal(t)
	got, err := fitCalibration(cal, syntheticRows(RuntimeLlamaServer, 80e6, 120), "test machine")
	if err != nil {
		t.Fatal(err)
	}
	if got.Runtimes[RuntimeOllama] != cal.Runtimes[RuntimeOllama] {
		t.Errorf("Ollama was not measured, yet its constants changed: %+v → %+v", cal.Runtimes[RuntimeOllama], got.Runtimes[RuntimeOllama])
	}
	one := syntheticRows(RuntimeOllama, 1e8, 0)[:1]
	if _, err := fitCalibration(cal, one, "m"); err == nil || !strings.Contains(err.Error(), "need at least 2") {
		t.Errorf("a fit from one run: %v", err)
	}
}

func TestOllamaBuffersReadsCommittedLoad(t *testing.T) {
	log := `time=x level=DEBUG source=device.go:245 msg="model weights" device=CPU size="405.2 MiB"
time=x level=DEBUG source=device.go:256 msg="kv cache" device=CPU size="20.7 MiB"
time=x level=DEBUG source=device.go:267 msg="compute graph" device=CPU size="27.5 MiB"
time=x level=DEBUG source=device.go:272 msg="total memory" size="453.4 MiB"
time=x level=INFO source=device.go:245 msg="model weights" device=CPU size="405.2 MiB"
time=x level=INFO source=device.go:256 msg="kv cache" device=CPU size="1.1 GiB"
time=x level=INFO source=device.go:267 msg="compute graph" device=CPU size="51.0 MiB"`
	mib := func(v float64) Size { return Size(v * float64(MiB)) }
	b := ollamaBuffers(log)
	if b.Model != mib(405.2) || b.KV != mib(1.1*1024) || b.Compute != 51*MiB {
		t.Errorf("parsed %+v; want the last load step's weights, KV and compute", b)
	}
	// On the llama.cpp runner, llama.cpp's own buffer lines are the allocations.
	llama := log + "\nload_tensors:          CPU model buffer size =    92.10 MiB\n"
	if b := ollamaBuffers(llama); b.Model != mib(92.1) {
		t.Errorf("llama.cpp runner lines: parsed %+v", b)
	}
	if got := ollamaTotal(log); got != mib(453.4) {
		t.Errorf("total memory: parsed %s, want 453.4 MiB", got)
	}
}

func TestOllamaEnvIsCleanAndPinned(t *testing.T) {
	t.Setenv("OLLAMA_KV_CACHE_TYPE", "q4_0")
	t.Setenv("OLLAMA_ORIGINS", "*")
	env := ollamaEnv("/d", 4242, Profile{Context: 8192, KVType: "Q8_0"})
	want := []string{"OLLAMA_KV_CACHE_TYPE=q8_0", "OLLAMA_FLASH_ATTENTION=1", "OLLAMA_CONTEXT_LENGTH=8192", "OLLAMA_HOST=127.0.0.1:4242", "OLLAMA_MODELS=/d/models", "OLLAMA_NUM_PARALLEL=1"}
	for _, w := range want {
		if !slices.Contains(env, w) {
			t.Errorf("env lacks %s: %v", w, env)
		}
	}
	for _, e := range env {
		if strings.HasPrefix(e, "OLLAMA_ORIGINS=") || e == "OLLAMA_KV_CACHE_TYPE=q4_0" {
			t.Errorf("the caller's %s leaked into the bench server", e)
		}
	}
}

// installedOrSkip returns the provisioned runtimes or skips an integration test.
func installedOrSkip(t *testing.T, keys ...string) map[string]string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped in -short mode")
	}
	m, err := LoadInstalled(DefaultInstalledPath())
	if err != nil {
		t.Skipf("integration test: %s missing (the lead's provisioning writes it); real runtimes are needed: %v", DefaultInstalledPath(), err)
	}
	for _, k := range keys {
		if _, err := os.Stat(m[k]); err != nil {
			t.Skipf("integration test: %s=%q is not there: %v", k, m[k], err)
		}
	}
	return m
}

func TestIntegrationTinyGGUFLoadsInLlamaServer(t *testing.T) {
	m := installedOrSkip(t, "LLAMA_SERVER_BIN")
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := WriteTinyGGUF(path, TinyOptions{Seed: 11, Context: 8192}); err != nil {
		t.Fatal(err)
	}
	opts := BenchOptions{LlamaServerBin: m["LLAMA_SERVER_BIN"], Limit: 2 * GiB, RunTimeout: 2 * time.Minute}
	p := Profile{Name: "tiny", CardMemory: 2 * GiB, Context: 8192, KVType: "f16", Parallel: 1, Simulated: true}
	peak, bufs, err := measureLlamaServer(context.Background(), opts, path, p)
	if err != nil {
		t.Fatalf("llama-server did not load and run the tiny model: %v", err)
	}
	if bufs.Model == 0 || bufs.KV == 0 || peak == 0 {
		t.Errorf("peak %s, buffers %+v", peak, bufs)
	}
}

func TestIntegrationRunBelowPredictionIsKilled(t *testing.T) {
	m := installedOrSkip(t, "LLAMA_SERVER_BIN", "SMOLLM2_GGUF")
	f, err := Open(m["SMOLLM2_GGUF"])
	if err != nil {
		t.Fatal(err)
	}
	p := Profile{Name: "too-small", Context: 8192, KVType: "f16", Parallel: 1, Simulated: true, CardMemory: GiB}
	e, err := Predict(f, p, RuntimeLlamaServer, mustCal(t))
	if err != nil {
		t.Fatal(err)
	}
	p.CardMemory = e.Peak / 2
	if v := Decide(e, p, time.Now()); v.Fits {
		t.Fatalf("preflight says %s fits in half its prediction", p.CardMemory)
	}
	opts := BenchOptions{LlamaServerBin: m["LLAMA_SERVER_BIN"], Limit: p.CardMemory, RunTimeout: 2 * time.Minute}
	_, _, err = measureLlamaServer(context.Background(), opts, m["SMOLLM2_GGUF"], p)
	if err == nil || !strings.Contains(err.Error(), "oom kills") {
		t.Fatalf("a run in %s (half the predicted %s) was not killed: %v", p.CardMemory, e.Peak, err)
	}
	if strings.Contains(err.Error(), "oom kills 0") {
		t.Errorf("killed, but not by the OOM killer: %v", err)
	}
}

func TestIntegrationFitPrintEvidence(t *testing.T) {
	m := installedOrSkip(t, "LLAMA_SERVER_BIN", "SMOLLM2_GGUF")
	bin := filepath.Join(filepath.Dir(m["LLAMA_SERVER_BIN"]), "llama-fit-params")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("llama-fit-params is not beside llama-server: %v", err)
	}
	p := Profile{Name: "fit", CardMemory: 8 * GiB, Context: 4096, KVType: "q8_0", Parallel: 1, Simulated: true}
	total, ev, err := FitPrint(context.Background(), bin, m["SMOLLM2_GGUF"], p)
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 || !strings.Contains(ev.Output, "Host") {
		t.Errorf("fit print %s, evidence %+v", total, ev)
	}
}

// BenchmarkReadGGUF measures header reading of the tiny model; the real
// models' headers (262k-token vocabularies) are read the same way.
func BenchmarkReadGGUF(b *testing.B) {
	data, err := TinyGGUF(TinyOptions{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data), int64(len(data)), "tiny.gguf"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestIntegrationFitDryRunEvidence(t *testing.T) {
	m := installedOrSkip(t, "LLAMA_SERVER_BIN", "SMOLLM2_GGUF")
	p := Profile{Name: "fit", CardMemory: 8 * GiB, Context: 4096, KVType: "f16", Parallel: 1, Simulated: true}
	total, ev, err := FitDryRun(context.Background(), m["LLAMA_SERVER_BIN"], m["SMOLLM2_GGUF"], p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(m["SMOLLM2_GGUF"])
	if err != nil {
		t.Fatal(err)
	}
	// llama.cpp's projection covers at least the weights and the KV cache.
	if total < Size(f.TensorBytes()) || !strings.Contains(ev.Output, "projected to use") {
		t.Errorf("projection %s below the weights %s; evidence %q", total, Size(f.TensorBytes()), ev.Output)
	}
}

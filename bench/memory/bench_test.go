package memory

import (
	"context"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/internal/gguf"
	"rig/internal/provision"
	"rig/preflight"
	"rig/runtimes"
)

func mustCal(t *testing.T) *preflight.Calibration {
	t.Helper()
	c, err := preflight.DefaultCalibration()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseBuffers(t *testing.T) {
	log := `llama_model_load_from_file_impl: using device CPU
load_tensors:          CPU model buffer size =   100.50 MiB
llama_kv_cache:        CPU KV buffer size =    60.00 MiB
llama_kv_cache:        CPU KV buffer size =     4.00 MiB
llama_context:        CPU  output buffer size =     0.19 MiB
sched_reserve:        CPU compute buffer size =   300.25 MiB`
	b := parseBuffers(log)
	if b.Model != preflight.Size(100.5*float64(preflight.MiB)) || b.KV != 64*preflight.MiB || b.Compute != preflight.Size(300.25*float64(preflight.MiB)) || b.Output == 0 {
		t.Errorf("parsed %+v", b)
	}
}

// syntheticRows are measurements of a runtime whose overhead is exactly
// base + perVocab × vocabulary, with ±2 MB of noise.
func syntheticRows(rt string, base, perVocab float64) []Row {
	var rows []Row
	for _, v := range []int{49152, 262144} {
		for i, parts := range []preflight.Size{300 * preflight.MiB, 500 * preflight.MiB, 900 * preflight.MiB} {
			noise := float64(i-1) * 2e6
			rows = append(rows, Row{Runtime: rt, vocab: v, parts: parts, Measured: preflight.Size(float64(parts) + base + perVocab*float64(v) + noise)})
		}
	}
	return rows
}

func TestFitCalibrationRecoversOverhead(t *testing.T) {
	cases := []struct {
		rt             string
		base, perVocab float64
	}{
		{preflight.RuntimeLlamaServer, 80e6, 120},
		{preflight.RuntimeOllama, 210e6, 310},
	}
	var rows []Row
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
	once, err := fitCalibration(cal, syntheticRows(preflight.RuntimeOllama, 60e6, 40), "m")
	if err != nil {
		t.Fatal(err)
	}
	// The same six configurations measured twice: the second run of each
	// lands 6% higher, as a peak can between runs.
	var rows []Row
	for _, r := range syntheticRows(preflight.RuntimeOllama, 60e6, 40) {
		first, second := r, r
		first.Model, second.Model = fmt.Sprint(r.vocab), fmt.Sprint(r.vocab)
		first.Context, second.Context = int(r.parts/preflight.MiB), int(r.parts/preflight.MiB)
		first.Repeat, second.Repeat = 1, 2
		second.Measured = preflight.Size(float64(r.Measured) * 1.06)
		rows = append(rows, first, second)
	}
	twice, err := fitCalibration(cal, rows, "m")
	if err != nil {
		t.Fatal(err)
	}
	o, r := once.Runtimes[preflight.RuntimeOllama], twice.Runtimes[preflight.RuntimeOllama]
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
	got, err := fitCalibration(cal, syntheticRows(preflight.RuntimeLlamaServer, 80e6, 120), "test machine")
	if err != nil {
		t.Fatal(err)
	}
	if got.Runtimes[preflight.RuntimeOllama] != cal.Runtimes[preflight.RuntimeOllama] {
		t.Errorf("Ollama was not measured, yet its constants changed: %+v → %+v", cal.Runtimes[preflight.RuntimeOllama], got.Runtimes[preflight.RuntimeOllama])
	}
	one := syntheticRows(preflight.RuntimeOllama, 1e8, 0)[:1]
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
	mib := func(v float64) preflight.Size { return preflight.Size(v * float64(preflight.MiB)) }
	b := ollamaBuffers(log)
	if b.Model != mib(405.2) || b.KV != mib(1.1*1024) || b.Compute != 51*preflight.MiB {
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

func TestTableNamesEachRuntimesStackOnce(t *testing.T) {
	stack := runtimes.Stack{Runtime: preflight.RuntimeLlamaServer, RuntimeVersion: "b1-80fb11a", BinarySHA256: strings.Repeat("a", 64),
		BuildFlags: "-DX=ON", Libraries: map[string]string{"/l/libllama.so": strings.Repeat("b", 64)}}
	rows := []Row{{Runtime: preflight.RuntimeLlamaServer, Stack: stack}, {Runtime: preflight.RuntimeLlamaServer, Stack: stack}}
	got := stackLines(rows)
	if strings.Count(got, "stack: llama-server b1-80fb11a") != 1 || strings.Contains(got, "different") {
		t.Errorf("two rows of one build:\n%s", got)
	}
	other := stack
	other.Libraries = map[string]string{"/l/libllama.so": strings.Repeat("c", 64)}
	rows = append(rows, Row{Runtime: preflight.RuntimeLlamaServer, Stack: other})
	if got := stackLines(rows); !strings.Contains(got, "2 different stacks") {
		t.Errorf("a row on another library is not called out:\n%s", got)
	}
}

// provisionedOrSkip returns what is provisioned, or skips an integration
// test: these start the real runtimes with the real models.
func provisionedOrSkip(t *testing.T, kinds ...string) provision.Installed {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped in -short mode")
	}
	in, err := provision.Load()
	if err != nil {
		t.Skipf("integration test: needs the real runtimes and models (run make setup): %v", err)
	}
	for _, k := range kinds {
		if _, err := runtimes.BuildOf(in, k); err != nil {
			t.Skipf("integration test: %v", err)
		}
	}
	if _, err := in.Model("smollm2-135m-instruct"); err != nil {
		t.Skipf("integration test: %v", err)
	}
	return in
}

func TestIntegrationTinyGGUFLoadsInLlamaServer(t *testing.T) {
	in := provisionedOrSkip(t, preflight.RuntimeLlamaServer)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	tmpl := "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
	if err := gguf.WriteTiny(path, gguf.TinyOptions{Seed: 11, Context: 8192, ChatTemplate: tmpl}); err != nil {
		t.Fatal(err)
	}
	opts := Options{Installed: in, Limit: 2 * preflight.GiB, RunTimeout: 2 * time.Minute}
	r, err := Measure(context.Background(), opts, preflight.RuntimeLlamaServer, provision.Model{Name: "tiny", Path: path}, 8192, "f16")
	if err != nil {
		t.Fatalf("llama-server did not load and run the tiny model: %v", err)
	}
	if r.Logged.Model == 0 || r.Logged.KV == 0 || r.Measured == 0 {
		t.Errorf("peak %s, buffers %+v", r.Measured, r.Logged)
	}
}

func TestIntegrationRunBelowPredictionIsKilled(t *testing.T) {
	in := provisionedOrSkip(t, preflight.RuntimeLlamaServer)
	m := in.Models["smollm2-135m-instruct"]
	f, err := gguf.Open(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	p := preflight.Profile{Name: "too-small", Context: 8192, KVType: "f16", Parallel: 1, Simulated: true, CardMemory: preflight.GiB}
	e, err := preflight.Predict(f, p, preflight.RuntimeLlamaServer, mustCal(t))
	if err != nil {
		t.Fatal(err)
	}
	p.CardMemory = e.Peak / 2
	if v := preflight.Decide(e, p, time.Now()); v.Fits {
		t.Fatalf("preflight says %s fits in half its prediction", p.CardMemory)
	}
	opts := Options{Installed: in, Limit: p.CardMemory, RunTimeout: 2 * time.Minute}
	_, err = Measure(context.Background(), opts, preflight.RuntimeLlamaServer, m, p.Context, p.KVType)
	if err == nil || !strings.Contains(err.Error(), "oom kills") {
		t.Fatalf("a run in %s (half the predicted %s) was not killed: %v", p.CardMemory, e.Peak, err)
	}
	if strings.Contains(err.Error(), "oom kills 0") {
		t.Errorf("killed, but not by the OOM killer: %v", err)
	}
}

// TestIntegrationOllamaPeakWithinCalibratedError runs the real Ollama with a
// real model in a reservation and checks rig's prediction against the
// measured peak, within the error the committed calibration claims.
func TestIntegrationOllamaPeakWithinCalibratedError(t *testing.T) {
	in := provisionedOrSkip(t, preflight.RuntimeOllama)
	m := in.Models["smollm2-135m-instruct"]
	cal := mustCal(t)
	rc, err := cal.For(preflight.RuntimeOllama)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Runs == 0 {
		t.Fatalf("preflight/calibration.json: runtimes.ollama: runs 0, the constants are guesses (run rig bench preflight --runtime ollama --fit)")
	}
	f, err := gguf.Open(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Installed: in, Limit: 2 * preflight.GiB, RunTimeout: 8 * time.Minute}
	p := preflight.Profile{Name: "bench-2048-q8_0", CardMemory: opts.Limit, Context: 2048, KVType: "q8_0", Parallel: 1, Simulated: true}
	e, err := preflight.Predict(f, p, preflight.RuntimeOllama, cal)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Measure(context.Background(), opts, preflight.RuntimeOllama, m, p.Context, p.KVType)
	if err != nil {
		t.Fatalf("Ollama did not load and run %s: %v", m.Path, err)
	}
	got := relErr(e.Peak, r.Measured)
	t.Logf("measured %s, rig %s (%+.1f%%, calibrated ±%.0f%%), Ollama's own %s, logged %+v", r.Measured, e.Peak, 100*got, 100*rc.RelError, r.Own, r.Logged)
	if math.Abs(got) > rc.RelError {
		t.Errorf("rig predicts %s for a measured peak of %s: %+.1f%%, beyond the calibrated %.0f%%", e.Peak, r.Measured, 100*got, 100*rc.RelError)
	}
	// The run used the pinned KV type: q8_0 at 2048 cells is about half of f16's.
	if r.Own == 0 || r.Logged.KV == 0 || r.Logged.KV > e.KVCache*11/10 {
		t.Errorf("Ollama's own size %s, logged KV %s; rig's q8_0 KV %s", r.Own, r.Logged.KV, e.KVCache)
	}
	if r.Stack.Runtime != preflight.RuntimeOllama || r.Stack.BinarySHA256 == "" || len(r.Stack.Libraries) == 0 {
		t.Errorf("the row's stack is not the runtime's: %+v", r.Stack)
	}
}

package preflight

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
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

func TestFitCalibrationRecoversOverhead(t *testing.T) {
	const base, perVocab = 80e6, 120.0
	var rows []BenchRow
	for _, v := range []int{49152, 262144} {
		for i, parts := range []Size{300 * MiB, 500 * MiB, 900 * MiB} {
			noise := float64(i-1) * 2e6
			rows = append(rows, BenchRow{vocab: v, parts: parts, Measured: Size(float64(parts) + base + perVocab*float64(v) + noise)})
		}
	}
	cal := mustCal(t)
	got, err := fitCalibration(cal, rows, "test machine")
	if err != nil {
		t.Fatal(err)
	}
	rc := got.Runtimes[RuntimeLlamaServer]
	if math.Abs(rc.BaseBytes-base) > 5e6 || math.Abs(rc.PerVocabBytes-perVocab) > 20 {
		t.Errorf("fitted base %.0f per-vocab %.1f; want about %.0f and %.0f", rc.BaseBytes, rc.PerVocabBytes, base, perVocab)
	}
	if rc.RelError < 0.03 || rc.RelError > 0.05 || rc.Runs != 6 {
		t.Errorf("relative error %.3f runs %d", rc.RelError, rc.Runs)
	}
	if got.Machine != "test machine" || cal.Runtimes[RuntimeLlamaServer].Runs == 6 {
		t.Errorf("fit must copy, not edit, the input calibration")
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

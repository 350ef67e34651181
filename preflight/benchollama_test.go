package preflight

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestIntegrationOllamaPeakWithinCalibratedError runs the real Ollama with a
// real model in a reservation and checks rig's prediction against the
// measured peak, within the error the committed calibration claims.
func TestIntegrationOllamaPeakWithinCalibratedError(t *testing.T) {
	m := installedOrSkip(t, "OLLAMA_BIN", "SMOLLM2_GGUF")
	cal := mustCal(t)
	rc, err := cal.For(RuntimeOllama)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Runs == 0 {
		t.Fatalf("preflight/calibration.json: runtimes.ollama: runs 0, the constants are guesses (run rig bench preflight --runtime ollama --fit)")
	}
	opts := BenchOptions{OllamaBin: m["OLLAMA_BIN"], Models: map[string]string{"smollm2": m["SMOLLM2_GGUF"]}, Limit: 2 * GiB, RunTimeout: 8 * time.Minute}
	ctx := context.Background()
	st, err := importOllama(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err := Open(m["SMOLLM2_GGUF"])
	if err != nil {
		t.Fatal(err)
	}
	p := Profile{Name: "bench-2048-q8_0", CardMemory: opts.Limit, Context: 2048, KVType: "q8_0", Parallel: 1, Simulated: true}
	e, err := Predict(f, p, RuntimeOllama, cal)
	if err != nil {
		t.Fatal(err)
	}
	peak, own, bufs, err := measureOllama(ctx, opts, st, "smollm2", p)
	if err != nil {
		t.Fatalf("Ollama did not load and run %s: %v", m["SMOLLM2_GGUF"], err)
	}
	got := relErr(e.Peak, peak)
	t.Logf("measured %s, rig %s (%+.1f%%, calibrated ±%.0f%%), Ollama's own %s, logged %+v", peak, e.Peak, 100*got, 100*rc.RelError, own, bufs)
	if math.Abs(got) > rc.RelError {
		t.Errorf("rig predicts %s for a measured peak of %s: %+.1f%%, beyond the calibrated %.0f%%", e.Peak, peak, 100*got, 100*rc.RelError)
	}
	// The run used the pinned KV type: q8_0 at 2048 cells is about half of f16's.
	if own == 0 || bufs.KV == 0 || bufs.KV > e.KVCache*11/10 {
		t.Errorf("Ollama's own size %s, logged KV %s; rig's q8_0 KV %s", own, bufs.KV, e.KVCache)
	}
}

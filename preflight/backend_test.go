package preflight

import (
	"errors"
	"strings"
	"testing"
)

// The committed table has no CUDA calibration (no card here has measured
// one): a real card's profile is refused as uncalibrated, never "fits".
func TestUncalibratedBackendIsRefused(t *testing.T) {
	f := fakeModel(t, "llama", 10, 256, 8, 2, 32, 0, 1000)
	p, err := ParseProfile("card=80GiB,ctx=4096,nvml=0")
	if err != nil {
		t.Fatal(err)
	}
	if p.Backend != "cuda" {
		t.Fatalf("nvml=0 gave backend %q, want cuda", p.Backend)
	}
	_, err = Predict(f, p, RuntimeLlamaServer, mustCal(t))
	if !errors.Is(err, ErrUncalibrated) || !errors.Is(err, ErrNotModelled) {
		t.Fatalf("got %v, want ErrUncalibrated (cannot decide)", err)
	}
	for _, want := range []string{"cuda backend", "rig bench preflight --device cuda"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// With a CUDA calibration the card holds its layers, their cache, the
// compute buffer and the context's own overhead; the host keeps the rest.
func TestCUDAEstimateSplitsCardAndHost(t *testing.T) {
	cal := mustCal(t)
	cpu, err := cal.For(RuntimeLlamaServer)
	if err != nil {
		t.Fatal(err)
	}
	// Constants made up for the arithmetic (a fake calibration), not measured.
	fakeCUDA := cpu
	fakeCUDA.CardContextBytes = 300 * float64(MiB)
	cal.Runtimes[CalibrationKey(RuntimeLlamaServer, "cuda")] = fakeCUDA
	f := fakeModel(t, "llama", 10, 256, 8, 2, 32, 0, 1000)
	full, err := Predict(f, Profile{Name: "h200", CardMemory: 80 * GiB, Context: 4096, OffloadLayers: OffloadAll, Backend: "cuda"}, RuntimeLlamaServer, cal)
	if err != nil {
		t.Fatal(err)
	}
	none, err := Predict(f, Profile{Name: "h200", CardMemory: 80 * GiB, Context: 4096, OffloadLayers: 0, Backend: "cuda"}, RuntimeLlamaServer, cal)
	if err != nil {
		t.Fatal(err)
	}
	if full.Card < Size(fakeCUDA.CardContextBytes)+full.KVCache {
		t.Errorf("full offload: card %s holds less than the context (%s) and the KV cache (%s)", full.Card, Size(fakeCUDA.CardContextBytes), full.KVCache)
	}
	if none.Card >= full.Card || none.Host <= full.Host {
		t.Errorf("no layers on the card: card %s→%s, host %s→%s", full.Card, none.Card, full.Host, none.Host)
	}
	if _, err := parseCalibration([]byte(`{"date":"d","machine":"m","runtimes":{"llama-server+cuda":{"compute_scale":1,"ubatch":512,"ctx_pad":256,"relative_error":0.05}}}`), "cal.json"); err == nil || !strings.Contains(err.Error(), "card_context_bytes") {
		t.Errorf("a CUDA calibration with no context overhead: got %v", err)
	}
}

package preflight

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestServerSizedFromTheGGUF sizes a generic server's arm as the weights
// and the KV cache of context × slots, nothing of its own, and says so.
func TestServerSizedFromTheGGUF(t *testing.T) {
	f := fakeModel(t, "llama", 30, 576, 9, 3, 64, 0, 1000)
	p := Profile{Name: "sim", CardMemory: 8 * GiB, Context: 4096, Simulated: true}
	e, err := Predict(f, p, RuntimeOpenAIServer, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 30 layers × 4096 cells × 3 kv heads × (64 + 64) × 2 bytes (f16).
	if want := Size(30 * 4096 * 3 * 128 * 2); e.KVCache != want || e.KVCells != 4096 {
		t.Errorf("KV cache %s at %d cells, want %s at 4096", e.KVCache, e.KVCells, want)
	}
	var weights Size
	for _, tn := range f.Tensors {
		weights += Size(tn.Bytes())
	}
	if e.Weights != weights || e.Compute != 0 || e.Overhead != 0 || e.Output != 0 {
		t.Errorf("weights %s (want %s), compute %s, output %s, overhead %s: only the GGUF's parts are sized", e.Weights, weights, e.Compute, e.Output, e.Overhead)
	}
	if e.Card != weights+e.KVCache || e.Peak != e.Card || e.RelError != ServerRelError {
		t.Errorf("card %s, peak %s, error %v", e.Card, e.Peak, e.RelError)
	}
	two, err := Predict(f, Profile{Name: "sim", CardMemory: 8 * GiB, Context: 4096, Parallel: 2, Simulated: true}, RuntimeOpenAIServer, nil)
	if err != nil || two.KVCache != 2*e.KVCache {
		t.Errorf("two slots: KV cache %s, want 2 × %s (%v)", two.KVCache, e.KVCache, err)
	}
	// A real card (a GPU server) holds everything too: a server places
	// the whole model on it, token embeddings included.
	real, err := Predict(f, Profile{Name: "nvml:0", CardMemory: 8 * GiB, Context: 4096, OffloadLayers: OffloadAll}, RuntimeOpenAIServer, nil)
	if err != nil || real.Card != e.Card || real.Host != 0 {
		t.Errorf("real card: card %s host %s, want %s and none (%v)", real.Card, real.Host, e.Card, err)
	}
	var out bytes.Buffer
	if err := Decide(e, p, time.Unix(0, 0)).Print(&out); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"runtime  openai-server", "an estimate from the GGUF for a server rig does not build", "calibrated never (an estimate from the GGUF)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("verdict does not say %q:\n%s", w, out.String())
		}
	}
}

// TestServerDoesntFitASmallCard decides on a small simulated card: short of
// the weights and KV cache, and inside them but short of the margin, both
// "doesn't fit"; with the margin, "fits".
func TestServerDoesntFitASmallCard(t *testing.T) {
	f := fakeModel(t, "llama", 30, 576, 9, 3, 64, 0, 1000)
	floor, err := Predict(f, Profile{Name: "sim", CardMemory: GiB, Context: 8192, Simulated: true}, RuntimeOpenAIServer, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		card Size
		fits bool
		says string
	}{
		{"short of the floor", floor.Card - MiB, false, "short"},
		{"inside the margin", floor.Card + floor.Card/10, false, "below the margin for a server rig does not build of 25%"},
		{"with the margin", floor.Card + floor.Card/3, true, "exceeds the margin for a server rig does not build 25%"},
	} {
		p := Profile{Name: "small", CardMemory: c.card, Context: 8192, Simulated: true}
		e, err := Predict(f, p, RuntimeOpenAIServer, nil)
		if err != nil {
			t.Fatal(err)
		}
		v := Decide(e, p, time.Unix(0, 0))
		if v.Fits != c.fits || !strings.Contains(v.Reason, c.says) {
			t.Errorf("%s (%s card, needs %s): fits=%v %q, want fits=%v saying %q", c.name, c.card, e.Card, v.Fits, v.Reason, c.fits, c.says)
		}
		if !c.fits && v.Outcome != OutcomeDoesntFit {
			t.Errorf("%s: outcome %q", c.name, v.Outcome)
		}
	}
}

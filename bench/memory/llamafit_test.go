package memory

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/gguf"
	"rig/preflight"
)

// The fit tools run contained, as runtimes do: these start the real ones.

func TestIntegrationFitPrintEvidence(t *testing.T) {
	in := provisionedOrSkip(t)
	bin := filepath.Join(filepath.Dir(in.LlamaServer), "llama-fit-params")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("llama-fit-params is not beside llama-server: %v", err)
	}
	p := preflight.Profile{Name: "fit", CardMemory: 8 * preflight.GiB, Context: 4096, KVType: "q8_0", Parallel: 1, Simulated: true}
	total, ev, err := FitPrint(context.Background(), bin, in.Models["smollm2-135m-instruct"].Path, p, false)
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 || !strings.Contains(ev.Output, "Host") {
		t.Errorf("fit print %s, evidence %+v", total, ev)
	}
}

func TestIntegrationFitDryRunEvidence(t *testing.T) {
	in := provisionedOrSkip(t)
	model := in.Models["smollm2-135m-instruct"].Path
	p := preflight.Profile{Name: "fit", CardMemory: 8 * preflight.GiB, Context: 4096, KVType: "f16", Parallel: 1, Simulated: true}
	total, ev, err := FitDryRun(context.Background(), in.LlamaServer, model, p, false)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	// llama.cpp's projection covers at least the weights and the KV cache.
	if total < preflight.Size(f.TensorBytes()) || !strings.Contains(ev.Output, "projected to use") {
		t.Errorf("projection %s below the weights %s; evidence %q", total, preflight.Size(f.TensorBytes()), ev.Output)
	}
}

package preflight

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/provision"
)

// provisionedOrSkip returns what is provisioned or skips an integration test
// that needs the real llama-server and SmolLM2.
func provisionedOrSkip(t *testing.T) provision.Installed {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped in -short mode")
	}
	in, err := provision.Load()
	if err != nil {
		t.Skipf("integration test: needs the real llama-server and SmolLM2 (run make setup): %v", err)
	}
	for _, p := range []string{in.LlamaServer, in.Models["smollm2-135m-instruct"].Path} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("integration test: %s is not there (run make setup): %v", p, err)
		}
	}
	return in
}

func TestIntegrationFitPrintEvidence(t *testing.T) {
	in := provisionedOrSkip(t)
	bin := filepath.Join(filepath.Dir(in.LlamaServer), "llama-fit-params")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("llama-fit-params is not beside llama-server: %v", err)
	}
	p := Profile{Name: "fit", CardMemory: 8 * GiB, Context: 4096, KVType: "q8_0", Parallel: 1, Simulated: true}
	total, ev, err := FitPrint(context.Background(), bin, in.Models["smollm2-135m-instruct"].Path, p)
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
	p := Profile{Name: "fit", CardMemory: 8 * GiB, Context: 4096, KVType: "f16", Parallel: 1, Simulated: true}
	total, ev, err := FitDryRun(context.Background(), in.LlamaServer, model, p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(model)
	if err != nil {
		t.Fatal(err)
	}
	// llama.cpp's projection covers at least the weights and the KV cache.
	if total < Size(f.TensorBytes()) || !strings.Contains(ev.Output, "projected to use") {
		t.Errorf("projection %s below the weights %s; evidence %q", total, Size(f.TensorBytes()), ev.Output)
	}
}

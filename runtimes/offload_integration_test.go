package runtimes

import (
	"context"
	"errors"
	"rig/internal/offload"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The CPU build refuses an arm pinned to the CUDA backend before anything
// starts: the pin names a build this one is not.
func TestCPUBuildRefusesACUDAPin(t *testing.T) {
	in := provisioned(t)
	b, err := BuildOf(in, "llama-server")
	if err != nil {
		t.Fatal(err)
	}
	m := in.Models["smollm2-135m-instruct"]
	_, err = b.Start(context.Background(), Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 1024, WorkDir: t.TempDir(),
		Offload: offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}})
	if err == nil || !strings.Contains(err.Error(), "backend cuda") || !strings.Contains(err.Error(), offload.ComponentLlamaServerCUDA) {
		t.Fatalf("got %v; want a refusal naming the backend and the CUDA build's component", err)
	}
}

// The real CUDA build, pinned to every layer on the card. Where NVML lists
// no card (these machines) the runtime loads on the host, and rig refuses
// that as "doesn't fit at this card" with the backend's own words; on a
// card the pin is held and the load report puts the weights there.
func TestCUDABuildHoldsOrRefusesFullOffload(t *testing.T) {
	in := provisioned(t)
	if in.LlamaServerCUDA == "" {
		t.Skip("no CUDA llama-server provisioned on this machine: it is built where nvidia-smi lists a card, or by RIG_CUDA_ARCHS=90 make setup (over an hour on 2 cores; docs/gpu.md)")
	}
	b, err := BuildOf(in, offload.ComponentLlamaServerCUDA)
	if err != nil {
		t.Fatal(err)
	}
	if b.Backend != offload.BackendCUDA || b.Runtime != "llama-server" {
		t.Fatalf("build %+v", b)
	}
	m := in.Models["smollm2-135m-instruct"]
	rt, err := b.Start(context.Background(), Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 1024, WorkDir: t.TempDir(),
		Offload: offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}})
	if !haveCard() {
		if !errors.Is(err, ErrOffloadNotHeld) {
			t.Fatalf("no card here: got %v, want ErrOffloadNotHeld", err)
		}
		if !strings.Contains(err.Error(), "no GPU offload") {
			t.Errorf("the refusal does not say the runtime offloaded nothing: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("on a card, full offload of a 135M model: %v", err)
	}
	defer rt.Stop(context.Background())
	p := rt.Pins()
	if p.Load == nil || p.Load.LayersOffloaded != p.Load.LayersTotal || p.Machine.Backend != offload.BackendCUDA {
		t.Errorf("pins %+v, load %+v", p.Offload, p.Load)
	}
}

func haveCard() bool {
	if nvml.Init() != nvml.SUCCESS {
		return false
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	return ret == nvml.SUCCESS && n > 0
}

// Ollama's CUDA build, pinned to every layer on the card: num_gpu goes to
// the runner and its own log ("offloaded N/M layers to GPU", then its
// model weights, kv cache and compute graph per device) is held to the pin.
// Where no card is listed (these machines) its GPU discovery fails, the
// runner loads on the host and rig refuses that as "doesn't fit at this
// card"; on a card the weights must sit there.
func TestOllamaCUDABuildHoldsOrRefusesFullOffload(t *testing.T) {
	in := provisioned(t)
	if in.OllamaCUDA == "" {
		t.Skip("no CUDA Ollama provisioned on this machine: it is built beside the CUDA llama-server, where nvidia-smi lists a card or by RIG_CUDA_ARCHS=90 make setup (docs/gpu.md)")
	}
	b, err := BuildOf(in, offload.ComponentOllamaCUDA)
	if err != nil {
		t.Fatal(err)
	}
	m := in.Models["gemma-3-270m"]
	work := t.TempDir()
	rt, err := b.Start(context.Background(), Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 1024, WorkDir: work,
		Offload: offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}})
	if !haveCard() {
		if !errors.Is(err, ErrOffloadNotHeld) {
			t.Fatalf("no card here: got %v, want ErrOffloadNotHeld", err)
		}
		if !strings.Contains(err.Error(), "placed 0 of") || !strings.Contains(err.Error(), "CPU model") {
			t.Errorf("the refusal does not say where the runner put the model: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("on a card, full offload of a 270M model: %v", err)
	}
	defer rt.Stop(context.Background())
	p := rt.Pins()
	if p.Load == nil || p.Load.LayersOffloaded != p.Load.LayersTotal || p.Machine.Backend != offload.BackendCUDA {
		t.Errorf("pins %+v, load %+v", p.Offload, p.Load)
	}
	if card, _ := p.Load.CardBytes(); card == 0 {
		t.Errorf("every layer offloaded, yet no card buffer: %v", p.Load)
	}
}

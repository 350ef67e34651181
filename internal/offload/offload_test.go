package offload

import (
	"errors"
	"strings"
	"testing"
)

func TestOffloadPinValidation(t *testing.T) {
	bad := []struct {
		pin  Pin
		want string
	}{
		{Pin{Backend: "rocm"}, "not one of cpu, cuda"},
		{Pin{GPULayers: 10}, "a CPU build has no card"},
		{Pin{FlashAttention: "on"}, "cuda backend only"},
		{Pin{Backend: BackendCUDA, GPULayers: -2}, "gpu_layers -2"},
		{Pin{Backend: BackendCUDA, FlashAttention: "auto"}, "flash_attention \"auto\""},
	}
	for _, c := range bad {
		err := c.pin.Validate()
		if !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error saying %q", c.pin, err, c.want)
		}
	}
	for _, ok := range []Pin{{}, {Backend: BackendCPU}, {Backend: BackendCUDA, GPULayers: AllLayers, FlashAttention: "on", KVOnHost: true}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

func TestPinFieldsAndComponent(t *testing.T) {
	cpu := Pin{}.PinFields()
	if cpu["offload_backend"] != "cpu" || cpu["gpu_layers"] != "0" || cpu["kv_cache_on_host"] != "true" || cpu["flash_attention"] != "default" {
		t.Errorf("the CPU path's pins %v", cpu)
	}
	card := Pin{Backend: BackendCUDA, GPULayers: AllLayers, FlashAttention: "on"}.PinFields()
	if card["offload_backend"] != "cuda" || card["gpu_layers"] != "all" || card["kv_cache_on_host"] != "false" || card["flash_attention"] != "on" {
		t.Errorf("a card's pins %v", card)
	}
	if Component("llama-server", BackendCUDA) != ComponentLlamaServerCUDA || Component("llama-server", "") != "llama-server" || Component("ollama", BackendCUDA) != ComponentOllamaCUDA || Component("ollama", BackendCPU) != "ollama" || Component("aider", BackendCUDA) != "aider" {
		t.Error("component names")
	}
}

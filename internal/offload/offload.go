// Package offload is the offload pin as data: where a runtime puts a model
// (the build's backend, the layers on the card, flash attention, the KV
// cache's place) and the name of the provisioned build that runs it. The
// design (studies) holds it and the launchers (runtimes) are started with
// it, so it lives here, below both. It is not the check of a loaded
// runtime against the pin, which needs the runtime's own report and is in
// runtimes.
package offload

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
)

// Backends a runtime build computes on.
const (
	BackendCPU  = "cpu"
	BackendCUDA = "cuda"
)

// AllLayers is Pin.GPULayers for "every layer on the card".
const AllLayers = -1

// Components of the CUDA builds, as a snapshot pins them beside the CPU
// builds' "llama-server" and "ollama".
const (
	ComponentLlamaServerCUDA = "llama-server+cuda"
	ComponentOllamaCUDA      = "ollama+cuda"
)

// Pin is an arm's offload pin. It is held like any other pin: recorded on
// every receipt and checked against the runtime's own report once the
// model has loaded. The zero value is the CPU path, which asks nothing of a
// card.
type Pin struct {
	// Backend is the build's compute backend: "cpu" (or empty) or "cuda".
	Backend string `json:"backend,omitempty"`
	// GPULayers is how many layers go on the card: AllLayers (-1) for every
	// layer and the output head, 0 for none. llama-server's --n-gpu-layers,
	// Ollama's num_gpu.
	GPULayers int `json:"gpu_layers"`
	// FlashAttention is "on" or "off"; empty leaves the runtime's default,
	// which is then recorded as "default" (a pin nobody chose is still a pin).
	FlashAttention string `json:"flash_attention,omitempty"`
	// KVOnHost keeps the KV cache in host memory while the layers sit on the
	// card (llama-server's --no-kv-offload). The default places each layer's
	// cache beside it.
	KVOnHost bool `json:"kv_on_host,omitempty"`
}

// ErrBad marks an offload pin that cannot be used.
var ErrBad = errors.New("bad offload pin")

// BackendName is the backend, "cpu" when unset.
func (p Pin) BackendName() string { return cmp.Or(p.Backend, BackendCPU) }

// OnCard reports whether the pin asks for a card at all.
func (p Pin) OnCard() bool { return p.Backend == BackendCUDA && p.GPULayers != 0 }

// Layers is GPULayers as runtimes and receipts spell it: "all" or a count.
func (p Pin) Layers() string {
	if p.GPULayers == AllLayers {
		return "all"
	}
	return strconv.Itoa(p.GPULayers)
}

// Validate checks the pin's values; field names are the design's JSON names.
func (p Pin) Validate() error {
	switch p.Backend {
	case "", BackendCPU:
		switch {
		case p.GPULayers != 0:
			return fmt.Errorf("%w: gpu_layers %d with backend cpu: a CPU build has no card to put layers on (set backend \"cuda\", or gpu_layers 0)", ErrBad, p.GPULayers)
		case p.FlashAttention != "" || p.KVOnHost:
			return fmt.Errorf("%w: flash_attention and kv_on_host are held on the cuda backend only; the CPU path runs the runtime's defaults (remove them, or set backend \"cuda\")", ErrBad)
		}
	case BackendCUDA:
	default:
		return fmt.Errorf("%w: backend %q is not one of cpu, cuda", ErrBad, p.Backend)
	}
	if p.GPULayers < AllLayers {
		return fmt.Errorf("%w: gpu_layers %d: use -1 for every layer, 0 for none, or a count", ErrBad, p.GPULayers)
	}
	switch p.FlashAttention {
	case "", "on", "off":
	default:
		return fmt.Errorf("%w: flash_attention %q is not one of on, off", ErrBad, p.FlashAttention)
	}
	return nil
}

// PinFields is the pin as receipt pin entries.
func (p Pin) PinFields() map[string]string {
	layers := p.Layers()
	if p.BackendName() == BackendCPU {
		layers = "0"
	}
	return map[string]string{
		"offload_backend":  p.BackendName(),
		"gpu_layers":       layers,
		"flash_attention":  cmp.Or(p.FlashAttention, "default"),
		"kv_cache_on_host": strconv.FormatBool(p.KVOnHost || p.BackendName() == BackendCPU),
	}
}

// Component is the provisioned component that runs runtime kind on
// backend: "llama-server+cuda" and "ollama+cuda" for the CUDA builds, else
// kind.
func Component(kind, backend string) string {
	if backend != BackendCUDA {
		return kind
	}
	switch kind {
	case "llama-server":
		return ComponentLlamaServerCUDA
	case "ollama":
		return ComponentOllamaCUDA
	}
	return kind
}

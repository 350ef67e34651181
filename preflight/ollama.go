package preflight

import (
	"slices"

	"rig/internal/gguf"
)

// ollamaEngineArchs are the architectures Ollama 0.17.4 runs on its own Go
// engine (fs/ggml's OllamaEngineRequired); every other architecture runs on
// its vendored llama.cpp runner, whose memory is llama-server's.
var ollamaEngineArchs = []string{
	"bert", "deepseek2", "deepseekocr", "gemma3", "gemma3n", "gptoss", "gpt-oss", "llama4", "mistral3", "mllama",
	"nomic-bert", "olmo3", "qwen25vl", "qwen3", "qwen3moe", "qwen3vl", "qwen3vlmoe", "glm4moelite", "lfm2",
}

// ollamaEngine reports whether Ollama runs arch on its own engine.
func ollamaEngine(arch string) bool { return slices.Contains(ollamaEngineArchs, arch) }

// ollamaTiedCopy is the extra weight memory Ollama's own engine holds for a
// model whose output head reuses the token embeddings: it loads the input
// and output layers into separate buffers, so the shared matrix is read
// twice, where llama.cpp keeps one copy.
func ollamaTiedCopy(f *gguf.File, h HParams, rt string) uint64 {
	if rt != RuntimeOllama || !h.TiedOutput || !ollamaEngine(h.Arch) {
		return 0
	}
	for _, t := range f.Tensors {
		if t.Name == "token_embd.weight" {
			return t.Bytes()
		}
	}
	return 0
}

// ollamaMaskBytes is the attention mask Ollama's own engine adds to the
// compute buffer llama.cpp also has: it reserves the worst case by building
// the mask over every cell for a full batch as float32 in Go and copying it
// into a float32 input tensor, both beside the f16 cast the graph uses.
func ollamaMaskBytes(h HParams, rt string, cells, swaCells, ubatch int) float64 {
	if rt != RuntimeOllama || !ollamaEngine(h.Arch) {
		return 0
	}
	return float64(cells+swaCells) * float64(ubatch) * (4 + 4)
}

// ollamaContext is the context Ollama actually runs: it lowers a requested
// context above the model's trained length to that length (llm/server.go),
// where llama-server runs what it is asked.
func ollamaContext(h HParams, rt string, context int) int {
	if rt == RuntimeOllama && h.ContextLen > 0 && context > h.ContextLen {
		return h.ContextLen
	}
	return context
}

// ollamaModelCopy is the page cache Ollama's copy of the model file charges
// to a simulated card. Its launcher (runtimes.Ollama) uploads the GGUF into
// a blob store in the run's work directory, and `ollama serve` writes it from
// inside the card's reservation, so the blob, the file's whole size, is
// charged there; the runner then reads its weights from that cached copy
// into memory of its own (no mmap), which Peak counts. The kernel writes the
// copy back and reclaims it before it would kill the run, so it is not part
// of what must fit. llama-server reads the file where it is, cached outside.
func ollamaModelCopy(f *gguf.File, rt string, p Profile) uint64 {
	if rt != RuntimeOllama || !p.Simulated || f.Size <= 0 {
		return 0
	}
	return uint64(f.Size)
}

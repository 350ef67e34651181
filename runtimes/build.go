package runtimes

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"rig/internal/offload"
	"rig/internal/provision"
)

// Build is which binary a runtime kind runs on this machine and how it was
// built, as provisioned. It is rig's one answer to that question: a trial, a
// replay, a bench row and the governor's fault harness all start their
// runtime from a Build, so the same build always records the same pins.
type Build struct {
	Runtime      string `json:"runtime"` // "llama-server", "ollama" or "aider"
	Binary       string `json:"binary"`
	BinarySHA256 string `json:"binary_sha256"`
	BuildFlags   string `json:"build_flags"`
	// Backend is the build's compute backend: "cpu" or "cuda".
	Backend string `json:"backend"`
	// LibDirs are folders outside the binary's own that it loads libraries
	// from (the CUDA build's toolkit: cudart, cuBLAS); the sandbox shows
	// them read-only.
	LibDirs []string `json:"lib_dirs,omitempty"`
}

// BuildOf reads the provisioned build of kind ("llama-server", "ollama", or
// "aider", the harness) and hashes its binary. With an error, the Build still
// names the binary it looked for.
func BuildOf(in provision.Installed, kind string) (Build, error) {
	b := Build{Runtime: kind}
	switch kind {
	case "llama-server":
		b.Binary, b.BuildFlags, b.Backend = in.LlamaServer, in.LlamaBuildFlag, offload.BackendCPU
	case offload.ComponentLlamaServerCUDA:
		b.Runtime, b.Backend = "llama-server", offload.BackendCUDA
		b.Binary, b.BuildFlags = in.LlamaServerCUDA, in.LlamaCUDABuildFlags
		if in.CUDAToolkit != "" {
			b.LibDirs = []string{filepath.Join(in.CUDAToolkit, "lib")}
		}
		if b.Binary == "" {
			return b, fmt.Errorf("%s: %s: %w: setup built no CUDA llama-server on this machine (it does where nvidia-smi lists a card, or with RIG_CUDA_ARCHS=90 make setup; docs/gpu.md)", orProvisioned(in.File), kind, ErrBinaryMissing)
		}
	case offload.ComponentOllamaCUDA:
		b.Runtime, b.Backend = "ollama", offload.BackendCUDA
		// Its runner folder carries its own copies of cudart and cuBLAS.
		b.Binary, b.BuildFlags = in.OllamaCUDA, in.OllamaBuildFlag+", with its CUDA runner for capability "+in.CUDAArchs
		if b.Binary == "" {
			return b, fmt.Errorf("%s: %s: %w: setup built no CUDA Ollama on this machine (it does beside a CUDA llama-server: where nvidia-smi lists a card, or with RIG_CUDA_ARCHS=90 make setup; docs/gpu.md)", orProvisioned(in.File), kind, ErrBinaryMissing)
		}
	case "ollama":
		b.Binary, b.BuildFlags, b.Backend = in.Ollama, in.OllamaBuildFlag, offload.BackendCPU
	case "aider":
		b.Binary = in.Aider
	default:
		return Build{}, fmt.Errorf("unknown runtime %q (known: llama-server, ollama; Aider runs on top of one of them)", kind)
	}
	if b.Binary == "" {
		return b, fmt.Errorf("%s: %s: %w: %w", orProvisioned(in.File), kind, ErrBinaryMissing, provision.ErrNotProvisioned)
	}
	if _, err := os.Stat(b.Binary); err != nil {
		return b, fmt.Errorf("%s: %w: %v (run make setup, or check `rig runtimes check`)", b.Binary, ErrBinaryMissing, err)
	}
	sum, err := stampedSHA256(b.Binary)
	if err != nil {
		return b, fmt.Errorf("%s: %w: %v", b.Binary, ErrBinaryMissing, err)
	}
	b.BinarySHA256 = sum
	return b, nil
}

func orProvisioned(file string) string {
	if file == "" {
		return "installed.env"
	}
	return file
}

// Launch starts a private server of kind from its provisioned build.
func Launch(ctx context.Context, in provision.Installed, kind string, cfg Config) (Runtime, error) {
	b, err := BuildOf(in, kind)
	if err != nil {
		return nil, err
	}
	return b.Start(ctx, cfg)
}

// Start starts a private server of this build. The binary and build flags
// are the build's; a cfg that names others is refused, so no caller can
// record a build it did not run.
func (b Build) Start(ctx context.Context, cfg Config) (Runtime, error) {
	if b.Runtime != "llama-server" && b.Runtime != "ollama" {
		return nil, fmt.Errorf("runtime %q: not a server (known: llama-server, ollama; Aider runs on top of one of them)", b.Runtime)
	}
	if (cfg.Binary != "" && cfg.Binary != b.Binary) || (cfg.BuildFlags != "" && cfg.BuildFlags != b.BuildFlags) {
		return nil, fmt.Errorf("starting %s: the config names binary %q with flags %q, the build is %q with %q (leave Binary and BuildFlags empty: the build decides them)",
			b.Runtime, cfg.Binary, cfg.BuildFlags, b.Binary, b.BuildFlags)
	}
	if want, have := cfg.Offload.BackendName(), cmp.Or(b.Backend, offload.BackendCPU); want != have {
		return nil, fmt.Errorf("starting %s: the offload pin names backend %s, this build is %s (start the %s build: component %q)",
			b.Runtime, want, have, want, offload.Component(b.Runtime, want))
	}
	cfg.Binary, cfg.BuildFlags, cfg.binarySHA256, cfg.libDirs = b.Binary, b.BuildFlags, b.BinarySHA256, b.LibDirs
	return start(ctx, b.Runtime, cfg)
}

package provision

import (
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

//go:embed pins.env
var pinsFile string

// ErrNotProvisioned means scripts/setup.sh has not run (or not to the end) on this machine.
var ErrNotProvisioned = errors.New("rig's runtimes and models are not provisioned (run: make setup)")

// Pins returns the pinned versions and sha256 of every provisioned artefact.
func Pins() map[string]string {
	pins, err := parseEnv(strings.NewReader(pinsFile), "internal/provision/pins.env")
	if err != nil {
		panic(err.Error())
	}
	return pins
}

// CacheDir is where scripts/setup.sh provisions: $RIG_CACHE, else $XDG_CACHE_HOME/rig, else ~/.cache/rig.
func CacheDir() string {
	if d := os.Getenv("RIG_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "rig")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "rig-cache")
	}
	return filepath.Join(home, ".cache", "rig")
}

// Path is the installed.env that scripts/setup.sh writes into CacheDir.
func Path() string { return filepath.Join(CacheDir(), "installed.env") }

// Installed is what scripts/setup.sh recorded in installed.env.
type Installed struct {
	// File is the installed.env this was read from.
	File           string
	Cache          string
	LlamaCppSrc    string
	LlamaServer    string
	LlamaBuildFlag string
	// LlamaBatchedBench is llama.cpp's llama-batched-bench from the same
	// build as LlamaServer: the runtime's own batched throughput, which
	// `rig bench slots` compares rig's slots against. Empty in an
	// installed.env written before setup built it.
	LlamaBatchedBench string
	Ollama            string
	// OllamaBuildFlag says how scripts/setup.sh built Ollama: installed.env's
	// OLLAMA_BUILD_FLAGS (the release-style build: CPU backends by CMake
	// preset, then the Go binary), or, for an installed.env written before
	// setup recorded it, the bare `go build` setup made then.
	OllamaBuildFlag string
	Aider           string
	// Temporal is the Temporal CLI, whose dev server is the scale-out
	// engine for tests and single hosts; TemporalSHA256 is its digest as
	// built.
	Temporal       string
	TemporalSHA256 string
	// PrefillScorer is rig-prefill-score, built by setup against the
	// pinned llama.cpp's own libraries (prefill replay).
	PrefillScorer string
	// LlamaServerCUDA is llama-server built with the CUDA backend, beside
	// the CPU one; empty where setup built none (no card found and no
	// RIG_CUDA_ARCHS). CUDAArchs are the compute capabilities it was
	// compiled for ("90"), CUDAToolkit the toolkit it was compiled with.
	LlamaServerCUDA     string
	LlamaCUDABuildFlags string
	CUDAToolkit         string
	CUDAArchs           string
	// OllamaCUDA is a copy of the Ollama binary beside Ollama's own CUDA
	// runner (lib/ollama/cuda_v13), built with the same toolkit; empty
	// where setup built no CUDA variant.
	OllamaCUDA string
	Models     map[string]Model // by registry name
	// OtherQuants holds, by the registry name of the model it derives from,
	// a second quant made here (replay's other-quant control); a model with
	// none has no entry.
	OtherQuants map[string]Model
}

// Model is one provisioned GGUF file and its pinned sha256.
type Model struct {
	Name   string // registry name, e.g. "smollm2-135m-instruct"
	Path   string
	SHA256 string
	Quant  string
	// DerivedFrom names the provisioned model this file was made from, for a
	// quant made here rather than taken from a registry package.
	DerivedFrom string
	// Key is the installed.env line that holds Path: a design names the
	// file as "${Key}".
	Key string
}

// Load reads installed.env from the cache (Path). It returns an error wrapping
// ErrNotProvisioned when the file is missing, so callers can tell the user to
// run make setup.
func Load() (Installed, error) { return LoadFile(Path()) }

// LoadFile reads an installed.env at path, for a caller told where it is (a
// command's --installed-env).
func LoadFile(path string) (Installed, error) {
	kv, err := readEnvFile(path)
	if err != nil {
		return Installed{}, err
	}
	pins := Pins()
	in := Installed{
		File:              path,
		Cache:             kv["RIG_CACHE"],
		LlamaCppSrc:       kv["LLAMA_CPP_SRC"],
		LlamaServer:       kv["LLAMA_SERVER_BIN"],
		LlamaBuildFlag:    kv["LLAMA_SERVER_BUILD_FLAGS"],
		LlamaBatchedBench: kv["LLAMA_BATCHED_BENCH_BIN"],
		Ollama:            kv["OLLAMA_BIN"],
		// The words every receipt has carried for the bare `go build` since
		// the first one: changing them would make the same build two pins.
		OllamaBuildFlag:     cmp.Or(kv["OLLAMA_BUILD_FLAGS"], "go build -trimpath (cgo, CPU), ollama v"+pins["OLLAMA_VERSION"]),
		Aider:               kv["AIDER_BIN"],
		Temporal:            kv["TEMPORAL_BIN"],
		TemporalSHA256:      kv["TEMPORAL_SHA256"],
		PrefillScorer:       kv["PREFILL_SCORER_BIN"],
		LlamaServerCUDA:     kv["LLAMA_SERVER_CUDA_BIN"],
		CUDAToolkit:         kv["CUDA_TOOLKIT"],
		CUDAArchs:           kv["CUDA_ARCHS"],
		OllamaCUDA:          kv["OLLAMA_CUDA_BIN"],
		LlamaCUDABuildFlags: kv["LLAMA_SERVER_CUDA_BUILD_FLAGS"],
		Models: map[string]Model{
			"smollm2-135m-instruct": {Name: "smollm2-135m-instruct", Path: kv["SMOLLM2_GGUF"], SHA256: pins["SMOLLM2_GGUF_SHA256"], Quant: "Q4_1", Key: "SMOLLM2_GGUF"},
			"gemma-3-270m":          {Name: "gemma-3-270m", Path: kv["GEMMA3_GGUF"], SHA256: pins["GEMMA3_GGUF_SHA256"], Quant: "Q4_K_M", Key: "GEMMA3_GGUF"},
		},
		OtherQuants: map[string]Model{},
	}
	if p := kv["SMOLLM2_REQUANT_Q8_0_GGUF"]; p != "" {
		in.OtherQuants["smollm2-135m-instruct"] = Model{Name: "smollm2-135m-instruct", Path: p,
			SHA256: pins["SMOLLM2_REQUANT_Q8_0_SHA256"], Quant: "Q8_0", DerivedFrom: "Q4_1, requantized here by llama-quantize", Key: "SMOLLM2_REQUANT_Q8_0_GGUF"}
	}
	if p := kv["GEMMA3_REQUANT_Q8_0_GGUF"]; p != "" {
		in.OtherQuants["gemma-3-270m"] = Model{Name: "gemma-3-270m", Path: p,
			SHA256: pins["GEMMA3_REQUANT_Q8_0_SHA256"], Quant: "Q8_0", DerivedFrom: "Q4_K_M, requantized here by llama-quantize", Key: "GEMMA3_REQUANT_Q8_0_GGUF"}
	}
	return in, nil
}

// ModelBySHA256 is the provisioned file with that content, whether it is a
// model's provisioned quant or one requantized here (OtherQuants): a record
// names its model by digest, and both kinds run in studies.
func (in Installed) ModelBySHA256(sum string) (Model, bool) {
	if sum == "" {
		return Model{}, false
	}
	for _, set := range []map[string]Model{in.Models, in.OtherQuants} {
		for _, m := range set {
			if m.SHA256 == sum && m.Path != "" {
				return m, true
			}
		}
	}
	return Model{}, false
}

// Model returns the provisioned model of that registry name, or an error
// that names the provisioned ones and make setup.
func (in Installed) Model(name string) (Model, error) {
	m, ok := in.Models[name]
	if ok && m.Path != "" {
		if _, err := os.Stat(m.Path); err == nil {
			return m, nil
		}
	}
	var names []string
	for n, m := range in.Models {
		if m.Path != "" {
			names = append(names, n)
		}
	}
	return Model{}, fmt.Errorf("%s: model %q: %w (provisioned: %s)", in.File, name, ErrNotProvisioned, strings.Join(sorted(names), ", "))
}

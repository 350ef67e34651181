// Package provision knows where rig's provisioned components live: it embeds
// the pin file that scripts/setup.sh reads, and reads the installed.env that the
// script writes into the cache. It does not install anything itself; `make setup`
// does, and every error here says so.
package provision

import (
	"bufio"
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
	pins, err := parseEnv(strings.NewReader(pinsFile))
	if err != nil {
		panic("internal/provision/pins.env is malformed: " + err.Error())
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

// Installed is what scripts/setup.sh recorded in installed.env.
type Installed struct {
	Cache          string
	LlamaCppSrc    string
	LlamaServer    string
	LlamaBuildFlag string
	Ollama         string
	Aider          string
	Models         map[string]Model // by registry name
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
}

// Load reads installed.env from the cache. It returns ErrNotProvisioned when the
// file is missing, so callers can tell the user to run make setup.
func Load() (Installed, error) {
	path := filepath.Join(CacheDir(), "installed.env")
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Installed{}, fmt.Errorf("%s is missing: %w", path, ErrNotProvisioned)
	}
	if err != nil {
		return Installed{}, err
	}
	defer f.Close()
	kv, err := parseEnv(f)
	if err != nil {
		return Installed{}, fmt.Errorf("%s: %w", path, err)
	}
	pins := Pins()
	in := Installed{
		Cache:          kv["RIG_CACHE"],
		LlamaCppSrc:    kv["LLAMA_CPP_SRC"],
		LlamaServer:    kv["LLAMA_SERVER_BIN"],
		LlamaBuildFlag: kv["LLAMA_SERVER_BUILD_FLAGS"],
		Ollama:         kv["OLLAMA_BIN"],
		Aider:          kv["AIDER_BIN"],
		Models: map[string]Model{
			"smollm2-135m-instruct": {Name: "smollm2-135m-instruct", Path: kv["SMOLLM2_GGUF"], SHA256: pins["SMOLLM2_GGUF_SHA256"], Quant: "Q4_1"},
			"gemma-3-270m":          {Name: "gemma-3-270m", Path: kv["GEMMA3_GGUF"], SHA256: pins["GEMMA3_GGUF_SHA256"], Quant: "Q4_K_M"},
		},
		OtherQuants: map[string]Model{},
	}
	if p := kv["SMOLLM2_REQUANT_Q8_0_GGUF"]; p != "" {
		in.OtherQuants["smollm2-135m-instruct"] = Model{Name: "smollm2-135m-instruct", Path: p,
			SHA256: pins["SMOLLM2_REQUANT_Q8_0_SHA256"], Quant: "Q8_0", DerivedFrom: "Q4_1, requantized here by llama-quantize"}
	}
	return in, nil
}

// parseEnv reads KEY=VALUE lines (bash-compatible subset: comments, optional double quotes).
func parseEnv(r interface{ Read([]byte) (int, error) }) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not KEY=VALUE", n, line)
		}
		out[k] = strings.Trim(v, `"`)
	}
	return out, sc.Err()
}

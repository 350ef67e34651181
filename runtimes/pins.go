package runtimes

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"rig/internal/offload"
	"sort"
	"strconv"
	"strings"
)

// Pins are the runtime's side of an arm's pins: what was loaded, by what, built
// how, on what machine. The design adds quant, context, sampling, stop cap and
// effort; both end up on every receipt and in the generation record's header.
type Pins struct {
	Stack
	ModelName    string `json:"model_name"`
	ModelFile    string `json:"model_file"`
	ModelSHA256  string `json:"model_sha256"`
	OllamaDigest string `json:"ollama_digest,omitempty"`
	Context      int    `json:"context"`
	// Slots is how many requests the server was started to serve at once,
	// each with the whole Context (Config.Slots; 1 when unset).
	Slots       int    `json:"slots,omitempty"`
	KVCacheType string `json:"kv_cache_type"`
	Threads     int    `json:"threads"`
	// WeightRepack and PromptCheckpoints are "on" or "off" on llama-server
	// (Config.WeightRepack, Config.PromptCheckpoints) and empty on Ollama,
	// whose engine decides them.
	WeightRepack      string      `json:"weight_repack,omitempty"`
	PromptCheckpoints string      `json:"prompt_checkpoints,omitempty"`
	ChatTemplate      string      `json:"chat_template"` // the GGUF's own, or the family's named format
	Sandboxed         bool        `json:"sandboxed"`
	NoSandbox         bool        `json:"no_sandbox"`
	Containment       Containment `json:"containment"`
	Machine           Machine     `json:"machine"`
	// Offload is the arm's offload pin and Load what the runtime reported
	// about where it put the model (nil on the CPU path).
	Offload offload.Pin `json:"offload,omitzero"`
	Load    *LoadReport `json:"load_report,omitempty"`
	// CPU is the CPU backend the runtime loaded and the features it
	// reported (its log's line), read once the model is loaded; nil when
	// the log said none. It depends on the processor as much as on the
	// build, so it is here and not in the Stack.
	CPU *CPUBackend `json:"cpu_backend,omitempty"`
	// ServedModel is the model name a generic server (openai-server) is
	// called with; empty for rig's own runtimes.
	ServedModel string `json:"served_model,omitempty"`
	// ServerCaps is, for a generic server, each pin held against what the
	// server reported it used when it started ("… held (/slots)"), or
	// "not reported" where it reports nothing for the pin (CapsSummary).
	ServerCaps string `json:"server_caps,omitempty"`
	// ServerRequest is, for a generic server, the fields its spec adds to
	// every request (serverspec.Spec.RequestPin), such as llama-server's
	// {"cache_prompt":false}; empty when it adds none.
	ServerRequest string `json:"server_request,omitempty"`
}

// Stack is the part of the pins that the runtime's build decides: its
// binary, build flags, the version the running server reports and every
// shared library its process tree mapped. The same build gives a
// byte-identical Stack whichever path started it (a trial, a replay, a bench
// row) and whatever it was started with (model, context, KV type, card,
// sandbox); everything that depends on those is in the rest of Pins.
type Stack struct {
	Runtime        string            `json:"runtime"`
	RuntimeVersion string            `json:"runtime_version"`
	BinarySHA256   string            `json:"binary_sha256"`
	BuildFlags     string            `json:"build_flags,omitempty"`
	Libraries      map[string]string `json:"libraries"` // path -> sha256, as loaded (/proc/PID/maps)
	// EnvSHA256 is, for a generic server in a Python environment
	// (openai-server), the digest of its installed distributions and
	// versions (PythonEnvDigest); empty for rig's own runtimes.
	EnvSHA256 string `json:"env_sha256,omitempty"`
}

// readStack reads a running server's Stack. version is what the server
// itself reports; a server that reports none is asked by `--version`.
func readStack(kind string, cfg Config, version string, pid int) (Stack, error) {
	bin, err := FileSHA256(cfg.Binary)
	if err != nil {
		return Stack{}, err
	}
	if cfg.binarySHA256 != "" && bin != cfg.binarySHA256 {
		return Stack{}, fmt.Errorf("%s: %w: %s now, %s when its build was read (the binary changed while it started; run make setup)", cfg.Binary, ErrChecksum, bin, cfg.binarySHA256)
	}
	libs, err := LoadedLibraries(ProcessTree(pid)...)
	if err != nil {
		return Stack{}, err
	}
	if version == "" {
		version = versionLine(cfg.Binary, "--version")
	}
	return Stack{Runtime: kind, RuntimeVersion: version, BinarySHA256: bin, BuildFlags: cfg.BuildFlags, Libraries: libs}, nil
}

// FileSHA256 hashes a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// verifyModel checks that a model file exists, is a GGUF, and matches its pin.
func verifyModel(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w: %v (run make setup, or fix the design's model.file)", path, ErrModelFile, err)
	}
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	f.Close()
	if err != nil || string(magic) != "GGUF" {
		// The bytes read are not quoted: the path may have been swapped
		// for a file its caller may not read since it was checked.
		return fmt.Errorf("%s: %w: not a GGUF file (it does not start with the GGUF magic); re-provision it with make setup", path, ErrModelFile)
	}
	if want == "" {
		return nil
	}
	got, err := stampedSHA256(path)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s: %w: got %s, pinned %s (the file changed since it was pinned; restore it or pin the new file as a new arm)", path, ErrChecksum, got, want)
	}
	return nil
}

// LoadedLibraries returns the sha256 of every shared library mapped by the
// given processes, read from /proc/PID/maps. It is evidence of the stack that
// actually ran, not the one that was meant to.
func LoadedLibraries(pids ...int) (map[string]string, error) {
	paths := map[string]bool{}
	for _, pid := range pids {
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "maps"))
		if err != nil {
			return nil, fmt.Errorf("reading the libraries of pid %d: %w", pid, err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 6 {
				continue
			}
			p := fields[5]
			base := filepath.Base(p)
			if strings.HasPrefix(p, "/") && (strings.HasSuffix(base, ".so") || strings.Contains(base, ".so.")) {
				paths[p] = true
			}
		}
		f.Close()
	}
	out := make(map[string]string, len(paths))
	keys := make([]string, 0, len(paths))
	for p := range paths {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	for _, p := range keys {
		sum, err := FileSHA256(p)
		if err != nil {
			// A library replaced on disk after it was mapped shows as "(deleted)".
			out[p] = "unreadable: " + err.Error()
			continue
		}
		out[p] = sum
	}
	return out, nil
}

// ProcessTree returns pid and all its descendants; nothing for a pid that
// is not one (0 would otherwise be every process on the host).
func ProcessTree(pid int) []int {
	if pid <= 0 {
		return nil
	}
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// TreeCPUTicks sums the user and system CPU ticks of pid and its descendants:
// the progress of a runtime whose calls are not streamed.
func TreeCPUTicks(pid int) int {
	total := 0
	for _, p := range ProcessTree(pid) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 12 {
			u, _ := strconv.Atoi(fields[11])
			k, _ := strconv.Atoi(fields[12])
			total += u + k
		}
	}
	return total
}

// onOff is how a llama-server setting that changes its arithmetic is
// written on its pins and records.
func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

package runtimes

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"rig/internal/offload"
	"rig/internal/provision"
)

// Component is one line of `rig runtimes check`.
type Component struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // ok, missing, differs, or "not built" (an optional build this machine has none of)
	Path    string `json:"path"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	Fix     string `json:"fix,omitempty"`
	// Backend is a runtime build's compute backend (cpu, cuda); Devices is
	// what the build itself lists as the devices it can compute on.
	Backend string   `json:"backend,omitempty"`
	Devices []string `json:"devices,omitempty"`
	// CPUBackend says, for an Ollama build, which of the CPU backend
	// variants it ships its loader picks on this processor (by ggml's own
	// rule; each run's pins record the one that did load).
	CPUBackend string `json:"cpu_backend,omitempty"`
}

const statusNotBuilt = "not built"

const fixSetup = "run `make setup` (scripts/setup.sh provisions it into the cache)"

// Check reports every provisioned component against its pin. ok is false when
// anything is missing or differs.
func Check() ([]Component, bool) {
	pins := provision.Pins()
	in, err := provision.Load()
	if err != nil {
		return []Component{{Name: "cache", Status: "missing", Path: provision.CacheDir(), Fix: err.Error()}}, false
	}
	var out []Component
	ok := true
	add := func(c Component) {
		if c.Status != "ok" && c.Status != statusNotBuilt {
			ok = false
		}
		out = append(out, c)
	}
	add(binary(in, "llama-server", "llama.cpp "+pins["LLAMA_CPP_COMMIT"][:12]))
	if in.LlamaServerCUDA != "" {
		c := binary(in, offload.ComponentLlamaServerCUDA, "llama.cpp "+pins["LLAMA_CPP_COMMIT"][:12])
		c.Version += ", CUDA " + pins["CUDA_TOOLKIT_VERSION"] + " for capability " + in.CUDAArchs
		add(c)
	} else {
		add(Component{Name: offload.ComponentLlamaServerCUDA, Status: statusNotBuilt, Backend: offload.BackendCUDA,
			Fix: "no card found at setup; RIG_CUDA_ARCHS=90 make setup builds it anyway (docs/gpu.md)"})
	}
	add(binary(in, "ollama", "v"+pins["OLLAMA_VERSION"]))
	if in.OllamaCUDA != "" {
		c := binary(in, offload.ComponentOllamaCUDA, "v"+pins["OLLAMA_VERSION"])
		c.Version += ", CUDA runner for capability " + in.CUDAArchs + " (no arm runs on it yet)"
		add(c)
	}
	add(binary(in, "aider", pins["AIDER_VERSION"]))
	// Every model file setup provisions is listed: the registry's quant and
	// the one requantized here (Q8_0), which Ollama arms of the demos run.
	for _, name := range []string{"smollm2-135m-instruct", "gemma-3-270m"} {
		add(modelComponent(name, in.Models[name]))
		if q, ok := in.OtherQuants[name]; ok {
			add(modelComponent(name+" "+q.Quant, q))
		} else {
			add(Component{Name: name + " Q8_0", Status: "missing", Fix: fixSetup})
		}
	}
	return out, ok
}

// modelComponent checks one provisioned model file against its pinned sha256.
func modelComponent(name string, m provision.Model) Component {
	c := Component{Name: name, Path: m.Path, Version: m.Quant}
	if m.DerivedFrom != "" {
		c.Version += " (from " + m.DerivedFrom + ")"
	}
	sum, err := FileSHA256(m.Path)
	switch {
	case err != nil:
		c.Status, c.Fix = "missing", fixSetup
	case sum != m.SHA256:
		c.Status, c.SHA256 = "differs", sum
		c.Fix = fmt.Sprintf("sha256 %s, pinned %s: remove %s and %s", sum, m.SHA256, m.Path, fixSetup)
	default:
		c.Status, c.SHA256 = "ok", sum
	}
	return c
}

func binary(in provision.Installed, kind, pinned string) Component {
	b, err := BuildOf(in, kind)
	c := Component{Name: kind, Path: b.Binary}
	if err != nil {
		c.Status, c.Fix = "missing", fixSetup
		return c
	}
	c.SHA256 = b.BinarySHA256
	c.Backend = b.Backend
	c.Version = versionLine(b.Binary, "--version")
	if b.Runtime == "llama-server" {
		c.Devices = ListDevices(b.Binary)
	}
	c.Status = "ok"
	if !strings.Contains(c.Version, strings.TrimPrefix(pinned, "v")) && !strings.HasPrefix(pinned, "llama.cpp") {
		c.Status = "differs"
		c.Fix = fmt.Sprintf("reports %q, pinned %s: %s", c.Version, pinned, fixSetup)
	}
	if b.Runtime == "ollama" && c.Status == "ok" {
		c.CPUBackend, c.Fix = ollamaCPUBackendLine(b.Binary, CPUFlags())
		if c.Fix != "" {
			c.Status = "differs"
		}
	}
	if strings.HasPrefix(pinned, "llama.cpp") {
		c.Version = pinned + " (" + c.Version + ")"
	}
	return c
}

// versionLine asks a binary its version (its first line of output that
// says one), with an empty environment so it cannot reach anything or read
// stray settings.
func versionLine(path string, args ...string) string {
	cmd := exec.Command(path, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + os.TempDir(), "AIDER_ANALYTICS=false", "AIDER_CHECK_UPDATE=false", "LITELLM_LOCAL_MODEL_COST_MAP=True"}
	b, _ := cmd.CombinedOutput()
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		// The CUDA backend speaks first: its device lines are not a version.
		if line == "" || strings.HasPrefix(line, "load_backend") || strings.Contains(line, "ggml_cuda_init") || strings.Contains(line, "compute capability") {
			continue
		}
		// Ollama's client, with no server to ask, reports its own version in a warning.
		if _, v, ok := strings.Cut(line, "client version is "); ok {
			return "ollama version " + v
		}
		if strings.HasPrefix(strings.ToLower(line), "warning") {
			continue
		}
		return line
	}
	return "unknown"
}

// ListDevices is what a llama-server build lists as its devices
// (--list-devices): "CUDA0: NVIDIA H200 (143167 MiB, 142000 MiB free)", or,
// on a CUDA build with no card, why the backend found none. A CPU build
// lists no device: it computes on the host.
func ListDevices(binary string) []string {
	cmd := exec.Command(binary, "--list-devices")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + os.TempDir()}
	b, _ := cmd.CombinedOutput()
	return parseDeviceList(string(b))
}

func parseDeviceList(out string) []string {
	var devs, notes []string
	listing := false
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "Available devices"):
			listing = true
		case listing && t != "" && strings.Contains(t, ":"):
			devs = append(devs, t)
		case strings.Contains(t, "ggml_cuda_init:") || strings.Contains(t, "no CUDA-capable device") || strings.Contains(t, "CUDA driver"):
			if i := strings.Index(t, "ggml_cuda_init:"); i > 0 {
				t = t[i:] // past the log's time stamp and level
			}
			notes = append(notes, t)
		}
	}
	if len(devs) == 0 && len(notes) > 0 {
		return []string{"no card: " + strings.Join(notes, "; ")}
	}
	return devs
}

// ollamaCPUBackendLine says which CPU backend an Ollama build's loader picks
// here, or, for a build that ships none (a bare `go build`, which computes
// on generic CPU code several times slower), the fix.
func ollamaCPUBackendLine(binary string, flags []string) (line, fix string) {
	shipped := ShippedCPUVariants(binary)
	if len(shipped) == 0 {
		return VariantCgo + " (no CPU backend library beside the binary)",
			fmt.Sprintf("%s ships no lib/ollama/libggml-cpu-*.so: it was built before setup built Ollama as its releases are, and computes without SIMD; %s", binary, fixSetup)
	}
	v := ExpectedCPUVariant(shipped, flags)
	if v == "" {
		return fmt.Sprintf("none of %s runs on this processor: cgo fallback", strings.Join(shipped, ", ")), ""
	}
	return fmt.Sprintf("%s (by this processor's flags; ships %s)", v, strings.Join(shipped, ", ")), ""
}

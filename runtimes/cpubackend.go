package runtimes

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// CPUBackend is the CPU backend a llama.cpp-based runtime computed with, as
// its own log and its process's mapped libraries say: which library it
// loaded and the processor features that backend was built to use. It is
// the machine's part of a run's speed, read from the runtime rather than
// assumed from its build: an Ollama built with a bare `go build` computes on
// a generic CPU backend (no SSE3, AVX or FMA) where a release build loads
// the variant for the processor, several times faster.
type CPUBackend struct {
	// Variant is the processor level of the library loaded: "icelake",
	// "haswell", … for Ollama's libggml-cpu-<variant>.so (GGML_CPU_ALL_VARIANTS,
	// chosen at run time by the processor's features); VariantFixed for a
	// single libggml-cpu.so whose features its build flags fixed
	// (llama-server's); VariantCgo for the CPU code compiled into Ollama's
	// own binary, which it falls back to when no library loads.
	Variant string `json:"variant"`
	// Library is the backend library's path, as loaded; empty for VariantCgo.
	Library string `json:"library,omitempty"`
	// Features are what the backend reports it was built with ("SSE3=1",
	// "AVX2=1", "LLAMAFILE=1", …), in the order it reports them.
	Features []string `json:"features"`
	// Line is the log line they were read from, as written (without its
	// time stamp): evidence a reader can grep the runtime's log for.
	Line string `json:"line"`
}

// The Variant of a backend that is not one of Ollama's per-processor libraries.
const (
	VariantFixed = "fixed"
	VariantCgo   = "cgo"
)

// simdFeatures are the processor features whose kernels make a CPU backend
// fast; a backend reporting none of them computes with scalar or SSE2 code.
var simdFeatures = []string{"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "AVX_VNNI",
	"AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8"}

// SIMD lists the SIMD features the backend reports on ("AVX2", "FMA", …).
func (c CPUBackend) SIMD() []string {
	var out []string
	for _, f := range c.Features {
		name, val, ok := strings.Cut(f, "=")
		if ok && val == "1" && slices.Contains(simdFeatures, name) {
			out = append(out, name)
		}
	}
	return out
}

// Has reports whether the backend reports feature on ("AVX2").
func (c CPUBackend) Has(feature string) bool {
	return slices.Contains(c.Features, feature+"=1")
}

// String is the one-line form on pins and receipts:
// "icelake (libggml-cpu-icelake.so): SSE3=1 SSSE3=1 AVX=1 …".
func (c CPUBackend) String() string {
	s := c.Variant
	if c.Library != "" {
		s += " (" + filepath.Base(c.Library) + ")"
	}
	return s + ": " + strings.Join(c.Features, " ")
}

var (
	// Ollama: `msg=system CPU.0.SSE3=1 CPU.0.SSSE3=1 … CPU.1.LLAMAFILE=1 compiler=cgo(gcc)`.
	ollamaSystemRE = regexp.MustCompile(`msg=system (.*)`)
	// ggml's loader: `load_backend: loaded CPU backend from /…/libggml-cpu-icelake.so`.
	loadedCPURE = regexp.MustCompile(`loaded CPU backend from (\S+)`)
	// llama-server: `system_info: n_threads = 1 (…) / 2 | CPU : SSE3 = 1 | … | REPACK = 1 |`.
	llamaSystemRE = regexp.MustCompile(`system_info: .*?\bCPU : (.*)`)
)

// ParseCPUBackend reads the CPU backend a runtime of kind ("llama-server" or
// "ollama") reported in its log, the last load's when it loaded several
// times. libraries are the runtime's mapped libraries (Stack.Libraries),
// which name llama-server's backend file. ok is false when the log holds no
// line of features (a runtime that has not loaded a model yet).
func ParseCPUBackend(kind string, log io.Reader, libraries map[string]string) (CPUBackend, bool) {
	var c CPUBackend
	found := false
	loaded := ""
	sc := bufio.NewScanner(log)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := loadedCPURE.FindStringSubmatch(line); m != nil {
			loaded = m[1]
		}
		switch kind {
		case "ollama":
			if m := ollamaSystemRE.FindStringSubmatch(line); m != nil {
				c, found = ollamaCPUBackend(m[1]), true
			}
		case "llama-server":
			if m := llamaSystemRE.FindStringSubmatch(line); m != nil {
				c, found = CPUBackend{Variant: VariantFixed, Features: llamaFeatures(m[1]), Line: strings.TrimSpace(m[0])}, true
			}
		}
	}
	if !found {
		return c, false
	}
	// The file the process mapped is the evidence of what computed; the
	// loader's line names it when the mapping was not read.
	if lib := cpuLibrary(libraries); lib != "" {
		c.Library = lib
	} else if loaded != "" {
		c.Library = loaded
	}
	if v := variantOf(c.Library); v != "" {
		c.Variant = v
	}
	return c, true
}

// ollamaCPUBackend reads the first CPU device's features from Ollama's system
// line. ggml lists its devices best first (a loaded library's scores above
// the compiled-in code's), so CPU.0 is the backend that computes.
func ollamaCPUBackend(msg string) CPUBackend {
	c := CPUBackend{Variant: VariantCgo, Line: "system " + strings.TrimSpace(msg)}
	for _, f := range strings.Fields(msg) {
		if rest, ok := strings.CutPrefix(f, "CPU.0."); ok {
			c.Features = append(c.Features, rest)
		}
	}
	return c
}

// llamaFeatures turns "SSE3 = 1 | SSSE3 = 1 | … |" into "SSE3=1", "SSSE3=1", ….
func llamaFeatures(s string) []string {
	var out []string
	for _, part := range strings.Split(s, "|") {
		name, val, ok := strings.Cut(part, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" || strings.Contains(name, ":") {
			// A second backend's section ("CUDA : ARCHS = 900") ends the CPU's.
			if strings.Contains(name, ":") {
				break
			}
			continue
		}
		out = append(out, name+"="+val)
	}
	return out
}

// cpuLibrary is the CPU backend library among a process's mapped libraries.
func cpuLibrary(libraries map[string]string) string {
	var found []string
	for p := range libraries {
		if strings.HasPrefix(filepath.Base(p), "libggml-cpu") {
			found = append(found, p)
		}
	}
	sort.Strings(found)
	if len(found) == 0 {
		return ""
	}
	return found[0]
}

// variantOf names the variant of a backend library by its file name:
// libggml-cpu-haswell.so is "haswell", libggml-cpu.so is VariantFixed.
func variantOf(library string) string {
	base := filepath.Base(library)
	if !strings.HasPrefix(base, "libggml-cpu") {
		return ""
	}
	name := strings.TrimPrefix(base, "libggml-cpu")
	if i := strings.Index(name, ".so"); i >= 0 {
		name = name[:i]
	}
	if name == "" {
		return VariantFixed
	}
	return strings.TrimPrefix(name, "-")
}

// readCPUBackend reads the CPU backend from a runtime's log file; nil when
// the log says none (it is evidence when present, never a reason to fail a
// start).
func readCPUBackend(kind, logPath string, libraries map[string]string) *CPUBackend {
	f, err := os.Open(logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	c, ok := ParseCPUBackend(kind, f, libraries)
	if !ok {
		return nil
	}
	return &c
}

// cpuVariant is one of the x86-64 CPU backends Ollama's CMake build ships
// (GGML_CPU_ALL_VARIANTS in its vendored ggml/src/CMakeLists.txt) and the
// processor features it needs, as /proc/cpuinfo names them.
type cpuVariant struct {
	name  string
	needs []string
}

var (
	sse42   = []string{"sse4_2"}
	avx     = append(slices.Clone(sse42), "avx")
	haswell = append(slices.Clone(avx), "f16c", "avx2", "bmi2", "fma")
	avx512  = append(slices.Clone(haswell), "avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")

	ollamaCPUVariants = []cpuVariant{
		{"x64", nil},
		{"sse42", sse42},
		{"sandybridge", avx},
		{"haswell", haswell},
		{"skylakex", avx512},
		{"icelake", append(slices.Clone(avx512), "avx512vbmi", "avx512_vnni")},
		{"alderlake", append(slices.Clone(haswell), "avx_vnni")},
	}

	// variantScore is ggml's weight of each feature a variant is built with
	// (ggml-cpu/arch/x86/cpu-feats.cpp); the loader takes the variant of the
	// highest sum whose every feature the processor has.
	variantScore = map[string]int{"fma": 1, "f16c": 1 << 1, "sse4_2": 1 << 2, "bmi2": 1 << 3, "avx": 1 << 4, "avx2": 1 << 5,
		"avx_vnni": 1 << 6, "avx512f": 1 << 7, "avx512vbmi": 1 << 8, "avx512_bf16": 1 << 9, "avx512_vnni": 1 << 10}
)

// ExpectedCPUVariant is the CPU backend Ollama's loader picks on a processor
// with flags among the variants shipped, by ggml's own rule; "" when none
// of them runs there (Ollama then computes on its cgo code). The variant
// that did load is on each run's pins (Pins.CPU); a test holds the two equal.
func ExpectedCPUVariant(shipped, flags []string) string {
	best, bestScore := "", 0
	for _, v := range ollamaCPUVariants {
		if !slices.Contains(shipped, v.name) {
			continue
		}
		score := 1
		for _, f := range v.needs {
			if !slices.Contains(flags, f) {
				score = 0
				break
			}
			score += variantScore[f]
		}
		if score > bestScore {
			best, bestScore = v.name, score
		}
	}
	return best
}

// ShippedCPUVariants lists the CPU backend variants beside an Ollama binary
// (bin/ollama's ../lib/ollama/libggml-cpu-<variant>.so), where its loader
// looks; none for a build that ships no library.
func ShippedCPUVariants(binary string) []string {
	libs, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(binary)), "lib", "ollama", "libggml-cpu-*.so"))
	var out []string
	for _, l := range libs {
		out = append(out, variantOf(l))
	}
	sort.Strings(out)
	return out
}

package runtimes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseCPUBackend reads the CPU backend from logs the runtimes wrote
// here: the old bare `go build` of Ollama (its runner's cgo code, no SIMD
// feature), the release-style build (a per-processor library), and
// llama-server's single library with its build flags' features.
func TestParseCPUBackend(t *testing.T) {
	for _, tc := range []struct {
		file, kind string
		libraries  map[string]string
		variant    string
		simd       bool // whether any SIMD feature is reported
		library    string
	}{
		{file: "loadreport/ollama-cpu-gemma3.log", kind: "ollama", variant: VariantCgo},
		{file: "cpubackend/ollama-release-smollm2.log", kind: "ollama", variant: "icelake", simd: true, library: "libggml-cpu-icelake.so"},
		{file: "loadreport/llama-server-cpu-smollm2.log", kind: "llama-server", variant: VariantFixed, simd: true, library: "libggml-cpu.so",
			libraries: map[string]string{"/c/build/bin/libggml-cpu.so": "x", "/c/build/bin/libggml-base.so": "y"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			c, ok := ParseCPUBackend(tc.kind, f, tc.libraries)
			if !ok {
				t.Fatalf("no CPU backend read from %s", tc.file)
			}
			if c.Variant != tc.variant {
				t.Errorf("variant %q, want %q (%s)", c.Variant, tc.variant, c)
			}
			if got := len(c.SIMD()) > 0; got != tc.simd {
				t.Errorf("SIMD features %v: reported %v, want %v (%s)", c.SIMD(), got, tc.simd, c.Line)
			}
			if filepath.Base(c.Library) != cmpOr(tc.library, ".") {
				t.Errorf("library %q, want %q", c.Library, tc.library)
			}
			if len(c.Features) == 0 || !strings.Contains(c.Line, strings.SplitN(c.Features[0], "=", 2)[0]) {
				t.Errorf("features %v not read from the line %q", c.Features, c.Line)
			}
		})
	}
}

func cmpOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}

// A log with no line of features (a runtime that has not loaded a model)
// gives no backend rather than a guessed one.
func TestParseCPUBackendNone(t *testing.T) {
	_, ok := ParseCPUBackend("ollama", strings.NewReader("time=… level=INFO msg=\"Listening on 127.0.0.1:11434\"\n"), nil)
	if ok {
		t.Fatal("a CPU backend was read from a log that names none")
	}
}

// TestLlamaFeaturesStopAtTheNextBackend: a CUDA build's line lists the CPU
// section after the CUDA one; only the CPU's features are the CPU backend's.
func TestLlamaFeaturesStopAtTheNextBackend(t *testing.T) {
	line := "common_param: system_info: n_threads = 1 (n_threads_batch = 1) / 2 | CUDA : ARCHS = 900 | NO_VMM = 1 | CPU : SSE3 = 1 | AVX2 = 1 | "
	c, ok := ParseCPUBackend("llama-server", strings.NewReader(line), nil)
	if !ok || !slices.Equal(c.Features, []string{"SSE3=1", "AVX2=1"}) {
		t.Fatalf("features %v (ok %v), want [SSE3=1 AVX2=1]", c.Features, ok)
	}
}

// TestOllamaLoadsTheCPUVariantForThisProcessor starts the real Ollama on each
// bundled model and fails when its runner reports no SIMD feature, or loads
// the generic CPU code (its cgo fallback, or the x64 library) on a processor
// that has AVX2: the build `make setup` made before it built Ollama as its
// releases are, which ran about 5× slower than llama-server on the same file.
func TestOllamaLoadsTheCPUVariantForThisProcessor(t *testing.T) {
	flags := CPUFlags()
	if len(flags) == 0 {
		t.Fatal("/proc/cpuinfo lists no flags: cannot tell what the processor has")
	}
	in := provisioned(t)
	for _, model := range []string{"smollm2-135m-instruct", "gemma-3-270m"} {
		t.Run(model, func(t *testing.T) {
			rt := startReal(t, "ollama", model, func(c *Config) { c.Threads = 1 })
			c := rt.Pins().CPU
			if c == nil {
				t.Fatal("the runner's log has no line of CPU features (msg=system …)")
			}
			t.Logf("loaded %s\n  %s", c, c.Line)
			if len(c.SIMD()) == 0 {
				t.Fatalf("the runner reports no SIMD feature: %s", c.Line)
			}
			// `rig runtimes check` names the variant by ggml's rule; the
			// runner must have loaded that one.
			if want := ExpectedCPUVariant(ShippedCPUVariants(in.Ollama), flags); c.Variant != want {
				t.Fatalf("the runner loaded %q, ggml's rule on this processor's flags picks %q among %v", c.Variant, want, ShippedCPUVariants(in.Ollama))
			}
			if !slices.Contains(flags, "avx2") {
				return
			}
			if c.Variant == VariantCgo || c.Variant == "x64" || c.Variant == "sse42" || c.Variant == "sandybridge" {
				t.Fatalf("the processor has AVX2, the runner loaded the %s CPU backend: %s", c.Variant, c.Line)
			}
			if !c.Has("AVX2") || !c.Has("FMA") {
				t.Fatalf("the processor has AVX2 and FMA, the runner's backend reports %v", c.Features)
			}
			lib := filepath.Join(filepath.Dir(filepath.Dir(in.Ollama)), "lib", "ollama")
			if !strings.HasPrefix(c.Library, lib+string(filepath.Separator)) {
				t.Fatalf("the backend %s is not the build's own (under %s)", c.Library, lib)
			}
			if _, mapped := rt.Pins().Libraries[c.Library]; !mapped {
				t.Fatalf("the backend %s is not among the libraries the runner mapped", c.Library)
			}
		})
	}
}

// TestExpectedCPUVariant picks as ggml's loader does: the highest-scoring
// shipped variant whose every feature the processor has.
func TestExpectedCPUVariant(t *testing.T) {
	all := []string{"alderlake", "haswell", "icelake", "sandybridge", "skylakex", "sse42", "x64"}
	haswellFlags := []string{"sse4_2", "avx", "f16c", "avx2", "bmi2", "fma"}
	icelakeFlags := append(slices.Clone(haswellFlags), "avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw", "avx512vbmi", "avx512_vnni")
	for _, tc := range []struct {
		name    string
		shipped []string
		flags   []string
		want    string
	}{
		{"icelake-class processor", all, icelakeFlags, "icelake"},
		{"icelake not shipped", slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == "icelake" }), icelakeFlags, "skylakex"},
		{"AVX2, no AVX-512", all, haswellFlags, "haswell"},
		{"AVX-VNNI without AVX-512", all, append(slices.Clone(haswellFlags), "avx_vnni"), "alderlake"},
		{"AVX-512F without BW", all, append(slices.Clone(haswellFlags), "avx512f", "avx512cd", "avx512vl", "avx512dq"), "haswell"},
		{"SSE2 only", all, nil, "x64"},
		{"nothing shipped", nil, icelakeFlags, ""},
	} {
		if got := ExpectedCPUVariant(tc.shipped, tc.flags); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// An Ollama binary with no backend library beside it (the bare `go build`
// setup made before) is reported with its fix; one with them names the
// variant this processor gets.
func TestOllamaCPUBackendLine(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", "ollama")
	if _, fix := ollamaCPUBackendLine(bin, []string{"avx2"}); !strings.Contains(fix, "make setup") {
		t.Fatalf("a build that ships no backend: fix %q, want one naming make setup", fix)
	}
	lib := filepath.Join(dir, "lib", "ollama")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"x64", "haswell"} {
		if err := os.WriteFile(filepath.Join(lib, "libggml-cpu-"+v+".so"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	line, fix := ollamaCPUBackendLine(bin, []string{"sse4_2", "avx", "f16c", "avx2", "bmi2", "fma"})
	if fix != "" || !strings.HasPrefix(line, "haswell ") {
		t.Fatalf("line %q, fix %q: want haswell and no fix", line, fix)
	}
}

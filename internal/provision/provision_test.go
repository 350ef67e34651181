package provision

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEnv(t *testing.T) {
	cases := []struct {
		name, in string
		want     map[string]string
		err      string
	}{
		{name: "setup.sh's own lines", in: "# Written by scripts/setup.sh\nRIG_CACHE=/c\nLLAMA_SERVER_BUILD_FLAGS=\"-DA=ON -DB=OFF\"\n",
			want: map[string]string{"RIG_CACHE": "/c", "LLAMA_SERVER_BUILD_FLAGS": "-DA=ON -DB=OFF"}},
		{name: "export and single quotes", in: "export SMOLLM2_GGUF='/m/s.gguf'\n\n  GEMMA3_GGUF = /m/g.gguf \n",
			want: map[string]string{"SMOLLM2_GGUF": "/m/s.gguf", "GEMMA3_GGUF": "/m/g.gguf"}},
		{name: "unmatched quote kept", in: "A=\"x\nB=y'\n", want: map[string]string{"A": `"x`, "B": "y'"}},
		{name: "empty value", in: "SMOLLM2_REQUANT_Q8_0_GGUF=\n", want: map[string]string{"SMOLLM2_REQUANT_Q8_0_GGUF": ""}},
		{name: "not KEY=VALUE", in: "A=1\nnonsense\n", err: "f.env:2:"},
		{name: "bad name", in: "1A=x\n", err: "f.env:1:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseEnv(strings.NewReader(c.in), "f.env")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestLoadHonoursRigCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RIG_CACHE", dir)
	if _, err := Load(); !errors.Is(err, ErrNotProvisioned) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("no installed.env: err = %v, want ErrNotProvisioned naming %s", err, dir)
	}
	body := "LLAMA_SERVER_BIN=/b/llama-server\nLLAMA_SERVER_BUILD_FLAGS=\"-DX=ON\"\nLLAMA_BATCHED_BENCH_BIN=/b/llama-batched-bench\nOLLAMA_BIN=/b/ollama\nSMOLLM2_GGUF=/m/s.gguf\n"
	if err := os.WriteFile(filepath.Join(dir, "installed.env"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if in.File != filepath.Join(dir, "installed.env") || in.LlamaServer != "/b/llama-server" || in.LlamaBuildFlag != "-DX=ON" || in.LlamaBatchedBench != "/b/llama-batched-bench" || in.Ollama != "/b/ollama" {
		t.Errorf("read %+v", in)
	}
	if m := in.Models["smollm2-135m-instruct"]; m.Path != "/m/s.gguf" || m.SHA256 != Pins()["SMOLLM2_GGUF_SHA256"] {
		t.Errorf("smollm2: %+v", m)
	}
	if want := "go build -trimpath (cgo, CPU), ollama v" + Pins()["OLLAMA_VERSION"]; in.OllamaBuildFlag != want {
		t.Errorf("Ollama's build flags %q, want %q", in.OllamaBuildFlag, want)
	}
	if _, err := in.Model("smollm2-135m-instruct"); !errors.Is(err, ErrNotProvisioned) {
		t.Errorf("a model whose file is not there: err = %v", err)
	}
	// The release-style build says how it was built; its words are the pin.
	body += "OLLAMA_BUILD_FLAGS=\"cmake --preset CPU + go build\"\n"
	if err := os.WriteFile(filepath.Join(dir, "installed.env"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if in, err = Load(); err != nil || in.OllamaBuildFlag != "cmake --preset CPU + go build" {
		t.Errorf("Ollama's build flags %q (err %v), want installed.env's", in.OllamaBuildFlag, err)
	}
}

func TestLookupPrefersTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RIG_CACHE", dir)
	t.Setenv("RIG_TEST_FROM_ENV", "env")
	lk, err := Lookup()
	if err != nil {
		t.Fatalf("without installed.env: %v", err)
	}
	if v, ok := lk("RIG_TEST_FROM_ENV"); !ok || v != "env" {
		t.Errorf("without installed.env the environment answers: %q %v", v, ok)
	}
	body := "RIG_TEST_FROM_ENV=file\nRIG_TEST_FROM_FILE=\"file\"\n"
	if err := os.WriteFile(filepath.Join(dir, "installed.env"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if lk, err = Lookup(); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"RIG_TEST_FROM_ENV": "env", "RIG_TEST_FROM_FILE": "file"} {
		if v, ok := lk(k); !ok || v != want {
			t.Errorf("%s = %q (%v), want %q", k, v, ok, want)
		}
	}
	if _, ok := lk("RIG_TEST_NOWHERE"); ok {
		t.Errorf("an unset name was found")
	}
	if err := os.WriteFile(filepath.Join(dir, "installed.env"), []byte("oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup(); err == nil || !strings.Contains(err.Error(), "installed.env:1:") {
		t.Errorf("a malformed installed.env: err = %v, want one naming its line", err)
	}
}

func TestPinsParse(t *testing.T) {
	p := Pins()
	for _, k := range []string{"LLAMA_CPP_COMMIT", "OLLAMA_VERSION", "LLAMA_CPP_CMAKE_FLAGS"} {
		if p[k] == "" {
			t.Errorf("pins.env: %s is empty", k)
		}
	}
}

func FuzzParseEnv(f *testing.F) {
	f.Add("A=1\n# c\nexport B='x y'\n")
	f.Add("LLAMA_SERVER_BUILD_FLAGS=\"-DA=ON\"\n=\n")
	f.Fuzz(func(t *testing.T, s string) {
		kv, err := parseEnv(strings.NewReader(s), "fuzz.env")
		if err != nil {
			return
		}
		for k := range kv {
			if !varName.MatchString(k) {
				t.Fatalf("accepted the name %q", k)
			}
		}
	})
}

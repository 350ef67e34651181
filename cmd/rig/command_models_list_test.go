package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/gguf"
)

// TestModelsList lists a library written by hand (a fake of what Ollama
// writes; TestOllamaTagStudy creates one with the real Ollama) holding a tiny
// real GGUF and a cloud tag, and a folder with a GGUF and a file that only
// looks like one.
func TestModelsList(t *testing.T) {
	tiny, err := gguf.Tiny(gguf.TinyOptions{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tiny)
	digest := hex.EncodeToString(sum[:])
	lib := t.TempDir()
	write := func(path string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(lib, "blobs", "sha256-"+digest), tiny)
	man, _ := json.Marshal(map[string]any{"layers": []any{map[string]any{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + digest, "size": len(tiny)}}})
	write(filepath.Join(lib, "manifests", "registry.ollama.ai", "library", "tiny", "latest"), man)
	cloud, _ := json.Marshal(map[string]any{"layers": []any{}})
	write(filepath.Join(lib, "manifests", "registry.ollama.ai", "library", "big", "120b-cloud"), cloud)
	dir := t.TempDir()
	write(filepath.Join(dir, "sub", "tiny.gguf"), tiny)
	write(filepath.Join(dir, "fake.gguf"), []byte("not a model"))
	t.Setenv("OLLAMA_MODELS", lib)

	var out bytes.Buffer
	cmd := newModelsListCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--dir", dir, "--sha256", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var n nameable
	if err := json.Unmarshal(out.Bytes(), &n); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	if len(n.Ollama.Tags) != 2 || n.Ollama.Tags[0].Tag != "big:120b-cloud" || n.Ollama.Tags[0].Refused == "" {
		t.Errorf("tags %+v: want the cloud tag listed as refused first", n.Ollama.Tags)
	}
	if m := n.Ollama.Tags[len(n.Ollama.Tags)-1].Model; m == nil || m.SHA256 != digest || m.Size != int64(len(tiny)) || m.Quant == "" {
		t.Errorf("tiny:latest resolved to %+v, want its blob %s with a quant from its header", m, digest)
	}
	if n.Folder == nil || len(n.Folder.Files) != 2 {
		t.Fatalf("folder %+v", n.Folder)
	}
	for _, f := range n.Folder.Files {
		switch filepath.Base(f.Path) {
		case "tiny.gguf":
			if f.SHA256 != digest || f.Error != "" {
				t.Errorf("tiny.gguf: %+v", f)
			}
		case "fake.gguf":
			if f.Error == "" {
				t.Errorf("fake.gguf listed without an error: %+v", f)
			}
		}
	}

	out.Reset()
	cmd = newModelsListCommand()
	cmd.SetOut(&out)
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ollama_tag": "TAG"`, "tiny:latest", "sha256:" + digest[:12], "big:120b-cloud", "cannot be named: ", "leave the machine"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the listing lacks %q:\n%s", want, out.String())
		}
	}
}

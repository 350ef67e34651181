package ollamalib

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeLibrary writes a library by hand, the way Ollama lays one out, so the
// resolution logic can be tested without Ollama (the real one is driven in
// cmd/rig's TestOllamaTagStudy).
type fakeLibrary struct {
	t   *testing.T
	lib Library
}

func newFakeLibrary(t *testing.T) *fakeLibrary {
	return &fakeLibrary{t: t, lib: Library{Dir: t.TempDir()}}
}

// blob writes data as a blob and returns its digest.
func (f *fakeLibrary) blob(data []byte) string {
	f.t.Helper()
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	dir := filepath.Join(f.lib.Dir, "blobs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sha256-"+hexSum), data, 0o644); err != nil {
		f.t.Fatal(err)
	}
	return "sha256:" + hexSum
}

func (f *fakeLibrary) manifest(rel string, m any) {
	f.t.Helper()
	p := filepath.Join(f.lib.Dir, "manifests", filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func layerOf(media, digest string, size int) map[string]any {
	return map[string]any{"mediaType": media, "digest": digest, "size": size}
}

func TestResolve(t *testing.T) {
	f := newFakeLibrary(t)
	gguf := append([]byte("GGUF"), make([]byte, 60)...)
	weights := f.blob(gguf)
	cfg := f.blob([]byte(`{"model_format":"gguf","model_family":"llama","file_type":"Q4_1"}`))
	tmpl := f.blob([]byte("{{ .Prompt }}"))
	f.manifest("registry.ollama.ai/library/smollm2/135m", map[string]any{
		"config": layerOf("application/vnd.docker.container.image.v1+json", cfg, 60),
		"layers": []any{layerOf(MediaModel, weights, len(gguf)), layerOf("application/vnd.ollama.image.template", tmpl, 13)},
	})
	cloudCfg := f.blob([]byte(`{"remote_host":"https://cloud.example:443","remote_model":"gpt-oss:120b"}`))
	f.manifest("registry.ollama.ai/library/gpt-oss/120b-cloud", map[string]any{
		"config": layerOf("application/vnd.docker.container.image.v1+json", cloudCfg, 70), "layers": []any{},
	})
	f.manifest("registry.ollama.ai/library/partial/latest", map[string]any{
		"layers": []any{layerOf(MediaModel, "sha256:"+strings.Repeat("a", 64), 10)},
	})
	f.manifest("registry.ollama.ai/library/safet/latest", map[string]any{
		"layers": []any{layerOf(MediaTensor, weights, len(gguf))},
	})
	notGGUF := f.blob([]byte("not a gguf at all"))
	f.manifest("hf.co/someone/repo/Q4", map[string]any{
		"layers": []any{layerOf(MediaModel, notGGUF, 17)},
	})

	m, err := f.lib.Resolve("smollm2:135m")
	if err != nil {
		t.Fatal(err)
	}
	if "sha256:"+m.SHA256 != weights || m.Quant != "Q4_1" || m.Size != int64(len(gguf)) || filepath.Base(m.Blob) != "sha256-"+m.SHA256 {
		t.Errorf("resolved %+v, want the weights blob %s", m, weights)
	}
	if m2, err := f.lib.Resolve("registry.ollama.ai/library/smollm2:135m"); err != nil || m2.SHA256 != m.SHA256 {
		t.Errorf("the fully qualified name resolved to %+v, %v", m2, err)
	}
	for tag, want := range map[string]string{
		"gpt-oss:120b-cloud":    "cloud model",
		"partial":               "not on this machine",
		"safet:latest":          "tensor layers",
		"hf.co/someone/repo:Q4": "not a GGUF",
	} {
		_, err := f.lib.Resolve(tag)
		if !errors.Is(err, ErrNotLocal) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrNotLocal saying %q", tag, err, want)
		}
	}
	if _, err := f.lib.Resolve("nothere:7b"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "ollama pull nothere:7b") {
		t.Errorf("a missing tag: %v", err)
	}
	if _, err := f.lib.Resolve("../../etc:passwd"); err == nil || !strings.Contains(err.Error(), "not an Ollama tag") {
		t.Errorf("a path as a tag: %v", err)
	}

	list, err := f.lib.List()
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, e := range list {
		tags = append(tags, e.Tag)
		if (e.Model == nil) == (e.Refused == "") {
			t.Errorf("%s: want a model or a refusal, got %+v", e.Tag, e)
		}
	}
	if got := strings.Join(tags, " "); got != "gpt-oss:120b-cloud hf.co/someone/repo:Q4 partial:latest safet:latest smollm2:135m" {
		t.Errorf("listed %s", got)
	}
}

func TestFindLibrary(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	l, _ := Find(func(k string) string { return env[k] })
	if l.Dir != "/home/u/.ollama/models" {
		t.Errorf("default library %s", l.Dir)
	}
	env["OLLAMA_MODELS"] = "/srv/models"
	if l, _ = Find(func(k string) string { return env[k] }); l.Dir != "/srv/models" {
		t.Errorf("OLLAMA_MODELS library %s", l.Dir)
	}
}

func TestListOfMissingLibraryIsEmpty(t *testing.T) {
	list, err := Library{Dir: filepath.Join(t.TempDir(), "none")}.List()
	if err != nil || len(list) != 0 {
		t.Errorf("%v, %v", list, err)
	}
}

// FuzzManifest feeds arbitrary manifests to the resolver: it must refuse or
// resolve, never panic, and a resolved blob always lies in the library.
func FuzzManifest(f *testing.F) {
	f.Add([]byte(`{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:` + strings.Repeat("0", 64) + `","size":4}]}`))
	f.Add([]byte(`{"config":{"digest":"sha256-../../x"},"layers":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "manifests", "h", "n", "m", "t")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		lib := Library{Dir: dir}
		m, err := lib.read("m:t", p)
		if err == nil && !strings.HasPrefix(m.Blob, filepath.Join(dir, "blobs")+string(filepath.Separator)) {
			t.Fatalf("resolved outside the library: %s", m.Blob)
		}
	})
}

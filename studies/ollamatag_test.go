package studies

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/ollamalib"
)

func TestApplyOllamaTags(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	resolved := func(tag string) (string, string, bool) {
		if tag == "smollm2:135m" {
			return "/lib/blobs/sha256-" + sum, sum, true
		}
		return "", "", false
	}
	d := demoDesign(t)
	d.Arms[0].Model = Model{RegistryName: "smollm2-135m-instruct", OllamaTag: "smollm2:135m"}
	if err := ApplyOllamaTags("design.json", d, resolved); err != nil {
		t.Fatal(err)
	}
	if m := d.Arms[0].Model; m.File != "/lib/blobs/sha256-"+sum || m.SHA256 != sum || m.OllamaTag != "smollm2:135m" {
		t.Errorf("applied %+v", m)
	}
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Errorf("a resolved tag does not validate: %v", err)
	}

	for name, c := range map[string]struct {
		model Model
		path  string
		want  string
	}{
		"unresolved": {Model{RegistryName: "x", OllamaTag: "other:7b"}, "arms[0].model.ollama_tag", "was not resolved"},
		"both":       {Model{RegistryName: "x", OllamaTag: "smollm2:135m", File: "a.gguf"}, "arms[0].model.ollama_tag", "not both"},
		"moved":      {Model{RegistryName: "x", OllamaTag: "smollm2:135m", SHA256: strings.Repeat("0", 64)}, "arms[0].model.sha256", "now names weights"},
	} {
		d := demoDesign(t)
		d.Arms[0].Model = c.model
		err := ApplyOllamaTags("design.json", d, resolved)
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != c.path || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a problem at %s saying %q", name, err, c.path, c.want)
		}
	}
}

// TestFileThatIsATag: a tag written as model.file is refused with the field
// to use, not with advice about the path.
func TestFileThatIsATag(t *testing.T) {
	d := demoDesign(t)
	d.Arms[0].Model = Model{RegistryName: "smollm2-135m-instruct", File: "smollm2:135m"}
	_, err := ResolveOllamaTags("design.json", d, ollamalib.Library{Dir: t.TempDir()}, ResolveOptions{Lookup: os.LookupEnv, BaseDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `arms[0].model.file: "smollm2:135m" is not a file here and looks like an Ollama tag: name it as "model": {"ollama_tag": "smollm2:135m"}`) {
		t.Errorf("got %v", err)
	}
	// A file of that name that exists is a file.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "smollm2:135m"), []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveOllamaTags("design.json", d, ollamalib.Library{Dir: t.TempDir()}, ResolveOptions{Lookup: os.LookupEnv, BaseDir: dir}); err != nil {
		t.Errorf("an existing file named like a tag: %v", err)
	}
	for ref, want := range map[string]bool{"smollm2:135m": true, "hf.co/u/r:Q4_K_M": true, "${SMOLLM2_GGUF}": false, "models/x.gguf": false, "/abs/path:x.gguf": false, "qwen2.5": false} {
		if got := looksLikeOllamaTag(ref); got != want {
			t.Errorf("looksLikeOllamaTag(%q) = %v", ref, got)
		}
	}
}

package studies

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInitThenLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "design.yaml")
	if err := InitDesign(path); err != nil {
		t.Fatal(err)
	}
	if err := InitDesign(path); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second init = %v, want a refusal to overwrite", err)
	}
	d, err := LoadDesign(context.Background(), path, ValidateOptions{})
	if err != nil {
		t.Fatalf("LoadDesign of the init example: %v", err)
	}
	if d.Name != "my-first-study" {
		t.Errorf("loaded name %q", d.Name)
	}
	if err := os.WriteFile(path, []byte("name: x\nrepeat: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadDesign(context.Background(), path, ValidateOptions{})
	var ve *ValidationError
	if !errors.As(err, &ve) || !ve.Has(KindUnknownField, "repeat") || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadDesign of a bad file = %v, want the unknown field named with the file", err)
	}
}

func TestEnvFileLookup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "installed.env")
	content := "# written by provision\nexport SMOLLM2_GGUF=/c/smol.gguf\nGEMMA3_GGUF=\"/c/gemma.gguf\"\n\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	lookup, err := EnvFileLookup(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"SMOLLM2_GGUF": "/c/smol.gguf", "GEMMA3_GGUF": "/c/gemma.gguf"} {
		if got, ok := lookup(k); !ok || got != want {
			t.Errorf("lookup(%s) = %q, %v; want %q", k, got, ok, want)
		}
	}
	if _, ok := lookup("RIG_TEST_SURELY_UNSET_VARIABLE"); ok {
		t.Error("unset variable found")
	}
	if err := os.WriteFile(path, []byte("not a line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := EnvFileLookup(path); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("bad env file = %v, want the line named", err)
	}
}

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

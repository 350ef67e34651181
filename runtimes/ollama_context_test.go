package runtimes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ollama would run a context above the trained length at the trained
// length; the driver refuses it before anything starts.
func TestOllamaRefusesAContextItWouldLower(t *testing.T) {
	in := provisioned(t)
	m := in.Models["smollm2-135m-instruct"]
	work := t.TempDir()
	_, err := Launch(context.Background(), in, "ollama", Config{Model: m.Path, ModelName: "smollm2-135m-instruct",
		ModelSHA256: m.SHA256, Context: 32768, WorkDir: work})
	if !errors.Is(err, ErrPinNotHeld) || !strings.Contains(err.Error(), "8192") {
		t.Fatalf("context 32768 on SmolLM2 (trained 8192): err = %v, want ErrPinNotHeld naming 8192", err)
	}
	if _, err := os.Stat(filepath.Join(work, "ollama.log")); err == nil {
		t.Error("ollama was started before the context was refused")
	}
}

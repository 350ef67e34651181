package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/gguf"
)

// writeVocabHeader writes a GGUF header that holds a tokenizer only: enough
// for fidelity's tokenizer check, which runs before any model is loaded.
func writeVocabHeader(t *testing.T, dir, name string, tokens []string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gguf.Encode(f, []gguf.KV{{Key: "tokenizer.ggml.tokens", Type: gguf.ValueArray, Value: tokens}}, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// Bad input is refused before anything runs, with the flag or file named.
func TestFidelityRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	ref := writeVocabHeader(t, dir, "ref.gguf", []string{"a", "b", "c"})
	other := writeVocabHeader(t, dir, "other.gguf", []string{"a", "b", "d"})
	text := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(text, []byte("some text"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fidelity", "--arm", other, "--text", text}, "--reference"},
		{[]string{"fidelity", "--reference", ref, "--text", text}, "--arm"},
		{[]string{"fidelity", "--reference", ref, "--arm", other}, "--text"},
		{[]string{"fidelity", "--reference", ref, "--arm", other, "--text", text, "--ctx", "2"}, "--ctx 2"},
		{[]string{"fidelity", "--reference", ref, "--arm", filepath.Join(dir, "missing.gguf"), "--text", text}, "missing.gguf"},
		{[]string{"bench", "fidelity", "--reference", ref, "--text", text}, "--arm"},
	} {
		_, err := runRig(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rig %s: got %v, want an error naming %s", strings.Join(c.args, " "), err, c.want)
		}
	}
	// Tokenizers that differ are refused naming the arm's file, from the
	// headers alone, before the scorer is looked for.
	_, err := runRig(t, "fidelity", "--reference", ref, "--arm", other, "--text", text, "--work-dir", filepath.Join(dir, "work"))
	if err == nil || !strings.Contains(err.Error(), "tokenizers differ") || !strings.Contains(err.Error(), other) {
		t.Errorf("differing tokenizers: got %v", err)
	}
}

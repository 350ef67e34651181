package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/provision"
	"rig/internal/testenv"
)

// TestRuntimesCheckListsEveryModelFile: every model file setup records in
// installed.env, the requantized Q8_0 files included, is a line of
// `rig runtimes check` with its path and the start of its sha256.
func TestRuntimesCheckListsEveryModelFile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(provision.CacheDir(), "installed.env"))
	testenv.NeedsSetup(t, "installed.env", err)
	out, err := runRig(t, "runtimes", "check")
	if err != nil {
		t.Fatalf("rig runtimes check: %v\n%s", err, out)
	}
	var models int
	for _, line := range strings.Split(string(raw), "\n") {
		key, path, ok := strings.Cut(line, "=")
		if !ok || !strings.HasSuffix(key, "_GGUF") || path == "" {
			continue
		}
		models++
		row := lineHolding(out, path)
		if row == "" {
			t.Errorf("%s (%s) is not listed:\n%s", key, path, out)
			continue
		}
		if !strings.Contains(row, " ok ") {
			t.Errorf("%s is listed but not ok: %q", key, row)
		}
	}
	if models < 4 {
		t.Errorf("installed.env names %d model files, want the two models and their Q8_0 requantizations", models)
	}
}

package tasks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepoStateKeepsFilesUpToTheirCap: RepoState reads what contained code
// left; a file of repoFileMax bytes is kept whole, one byte more is left out.
func TestRepoStateKeepsFilesUpToTheirCap(t *testing.T) {
	dir := t.TempDir()
	at := strings.Repeat("a", repoFileMax)
	if err := os.WriteFile(filepath.Join(dir, "at.txt"), []byte(at), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "past.bin"), []byte(at+"b"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := RepoState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if files["at.txt"] != at {
		t.Errorf("a file of repoFileMax bytes kept as %d bytes", len(files["at.txt"]))
	}
	if _, ok := files["past.bin"]; ok {
		t.Error("a file past repoFileMax was kept")
	}
	if v, ok := files["empty.py"]; !ok || v != "" {
		t.Errorf("an empty file: %q, %v", v, ok)
	}
}

package serverspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpeaks(t *testing.T) {
	if !(Spec{}).Speaks(APIChat) || (Spec{}).Speaks(APICompletions) {
		t.Error("a spec naming no API speaks chat only")
	}
	if s := (Spec{API: []string{APICompletions}}); s.Speaks(APIChat) || !s.Speaks(APICompletions) {
		t.Error("api [completions]")
	}
}

// FuzzDistMetadata feeds arbitrary METADATA headers to the reader: it reads
// a name and a version or refuses, never panics, and never returns an empty
// name with no error.
func FuzzDistMetadata(f *testing.F) {
	f.Add([]byte("Metadata-Version: 2.1\nName: uvicorn\nVersion: 0.30.0\n\nbody"))
	f.Add([]byte("Name: \nVersion: 1\n"))
	f.Add([]byte(strings.Repeat("X: y\n", 500) + "Name: a\nVersion: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "METADATA")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		name, version, err := distMetadata(p)
		if err == nil && (name == "" || version == "") {
			t.Fatalf("no error but name %q version %q", name, version)
		}
	})
}

package licences

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/textcheck"
)

// A studio registry with a byte that is not UTF-8 is refused, naming the
// line and the offset, by LoadRegistry and OpenSet alike.
func TestRegistryInvalidUTF8(t *testing.T) {
	text := strings.Replace(validRegistry, `"entries"`, "\"entr\xffies\"", 1)
	path := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	off := strings.IndexByte(text, 0xff)
	col := off - strings.LastIndexByte(text[:off], '\n')
	_, err1 := LoadRegistry(path)
	_, err2 := OpenSet(path)
	for _, err := range []error{err1, err2} {
		if !errors.Is(err, textcheck.ErrInvalidUTF8) || !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalidUTF8 and ErrInvalid", err)
		}
		for _, want := range []string{path, "line 3", fmt.Sprintf("column %d", col), fmt.Sprintf("byte offset %d", off), "save the file as UTF-8"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err, want)
			}
		}
	}
}

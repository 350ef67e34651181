package studies

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/textcheck"
)

// A design with a byte that is not UTF-8 is refused at its line and offset,
// JSON or YAML, before any decoder turns the byte into U+FFFD.
func TestLoadDesignInvalidUTF8(t *testing.T) {
	for name, text := range map[string]string{
		"design.json": "{\n  \"name\": \"x\",\n  \"sentences\": \"caf\xff\"\n}\n",
		"design.yaml": "name: x\nrepeats: 1\nsentences: caf\xff\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadDesign(context.Background(), path, ValidateOptions{})
			var pe *ParseError
			if !errors.Is(err, textcheck.ErrInvalidUTF8) || !errors.As(err, &pe) || pe.Line != 3 {
				t.Fatalf("err = %v, want a ParseError on line 3 wrapping ErrInvalidUTF8", err)
			}
			off := strings.IndexByte(text, 0xff)
			for _, want := range []string{path + ":3:", fmt.Sprintf("byte offset %d", off), "save the file as UTF-8"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q lacks %q", err, want)
				}
			}
		})
	}
}

package governor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/textcheck"
)

// A config with a byte that is not UTF-8 is refused naming the line and the
// offset, not decoded with U+FFFD in a policy name.
func TestLoadConfigInvalidUTF8(t *testing.T) {
	text := "{\n  \"poll_ms\": 250,\n  \"policies\": {\"over-power\xff\": {}}\n}\n"
	path := filepath.Join(t.TempDir(), "governor.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	var ce *ConfigError
	if !errors.Is(err, textcheck.ErrInvalidUTF8) || !errors.As(err, &ce) || ce.File != path {
		t.Fatalf("err = %v, want a ConfigError wrapping ErrInvalidUTF8", err)
	}
	off := strings.IndexByte(text, 0xff)
	for _, want := range []string{path, "line 3", fmt.Sprintf("byte offset %d", off), "save the file as UTF-8"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

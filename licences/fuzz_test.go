package licences

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseRegistry checks the parser never panics and that whatever it
// accepts survives Marshal and a second parse unchanged.
func FuzzParseRegistry(f *testing.F) {
	f.Add([]byte(validRegistry))
	if b, err := os.ReadFile("registry.json"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{``, `{}`, `null`, `{"schema_version":1,"entries":[]}`, `{"schema_version":1,"entries":[{}]}`,
		`{"schema_version":1,"entries":[{"id":"x","verdicts":{"inference":{}}}]}`, `{"schema_version":"1"}`, `{"a":1}{`,
		strings.Replace(validRegistry, "Model A", "Model \xff", 1)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reg, err := ParseRegistry("fuzz.json", data)
		if err != nil {
			if reg != nil {
				t.Fatal("error with a non-nil registry")
			}
			return
		}
		if !utf8.Valid(data) {
			t.Fatal("a registry that is not UTF-8 was accepted")
		}
		out, err := reg.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := ParseRegistry("fuzz.json", out)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(reg, again) {
			t.Fatalf("round trip changed the registry")
		}
	})
}

package licences

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// studioRegistry holds a newcomer's own task bank, and a stricter reading of
// a bundled model than the bundled one, so both layering rules are seen.
const studioRegistry = `{"schema_version":1,"entries":[
 {"id":"my-bank","item":"My task bank","kind":"dataset","licence":"studio rule","source_page":"studio wiki: banks","clause":"§1","date_read":"2026-12-01",
  "verdicts":{"evaluation":{"verdict":"allowed","reading":"our own bank, written in-house"}}},
 {"id":"smollm2-135m-instruct","item":"SmolLM2 re-read","kind":"model","licence":"Apache-2.0","source_page":"model card","clause":"§4","date_read":"2026-12-01",
  "verdicts":{"evaluation":{"verdict":"banned","reading":"studio re-read: not for evaluation here"}}}
]}`

func writeStudio(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "studio-registry.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSetLayersStudioOverBundled(t *testing.T) {
	path := writeStudio(t, studioRegistry)
	set, err := OpenSet(path)
	if err != nil {
		t.Fatal(err)
	}
	if set.StudioSHA256 != sha256Hex([]byte(studioRegistry)) {
		t.Errorf("StudioSHA256 = %s, want the hash of the file's bytes", set.StudioSHA256)
	}
	tests := []struct {
		name        string
		item        Item
		wantFrom    string // registry file of the passing line; "" when it blocks
		wantBlocked string
	}{
		{"studio-only id comes from the studio file", Item{RoleDataset, "My bank", "my-bank", UseEvaluation}, path, ""},
		{"id the studio lacks comes from the bundled registry", Item{RoleRuntime, "Ollama", "ollama", UseInference}, BundledFile, ""},
		{"id in both: the studio's entry wins", Item{RoleCandidate, "SmolLM2", "smollm2-135m-instruct", UseEvaluation}, "",
			`as entry "smollm2-135m-instruct" in ` + path},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := set.Check([]Item{tc.item})
			if tc.wantBlocked != "" {
				err := res.Err()
				if !errors.Is(err, ErrBlocked) || !strings.Contains(err.Error(), tc.wantBlocked) {
					t.Fatalf("err = %v, want a block containing %q", err, tc.wantBlocked)
				}
				return
			}
			if err := res.Err(); err != nil {
				t.Fatal(err)
			}
			l := res.Lines[0]
			if l.Registry != tc.wantFrom || !strings.HasSuffix(l.Sourced(), " from "+tc.wantFrom) {
				t.Errorf("line %q from %q, want from %q", l.Sourced(), l.Registry, tc.wantFrom)
			}
			if l.String() == l.Sourced() || strings.Contains(l.String(), " from ") {
				t.Errorf("String() %q should stay the seed form, without the file", l.String())
			}
		})
	}
	if set.Check([]Item{{RoleDataset, "My bank", "my-bank", UseEvaluation}}).UsedBundled() {
		t.Error("UsedBundled true for a check that used only the studio file")
	}
	if !set.Check([]Item{{RoleRuntime, "Ollama", "ollama", UseInference}}).UsedBundled() {
		t.Error("UsedBundled false for a check that used a bundled entry")
	}
}

// The message of a block names the registry files actually read, and sends
// the fix to a file the user can edit.
func TestSetBlocksNameTheRegistryUsed(t *testing.T) {
	path := writeStudio(t, studioRegistry)
	studio, err := OpenSet(path)
	if err != nil {
		t.Fatal(err)
	}
	bundled, err := OpenSet("")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		set     *Set
		item    Item
		want    []string
		wantNot []string
	}{
		{"missing id with a studio file", studio, Item{RoleDataset, "Other bank", "other-bank", UseEvaluation},
			[]string{`no entry "other-bank" in ` + path + " or " + BundledFile, `add an entry with id "other-bank" to ` + path},
			[]string{"studio licence registry (a file"}},
		{"missing id with the bundled registry alone", bundled, Item{RoleDataset, "My bank", "my-bank", UseEvaluation},
			[]string{`no entry "my-bank" in ` + BundledFile, "a studio licence registry", "--registry FILE", "RIG_LICENCE_REGISTRY"},
			nil},
		{"commonly banned use on a bundled entry", studio, Item{RoleTool, "node-llama-cpp", "node-llama-cpp", UseDistillation},
			[]string{`entry "node-llama-cpp" in ` + BundledFile + " has no reading", path + `, copying the bundled entry "node-llama-cpp"`},
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.set.Check([]Item{tc.item}).Err()
			if !errors.Is(err, ErrBlocked) {
				t.Fatalf("err = %v, want ErrBlocked", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error has %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestOpenSetErrorsNameTheFile(t *testing.T) {
	bad := writeStudio(t, `{"schema_version":1,"entries":[{"id":"x"}]}`)
	missing := filepath.Join(t.TempDir(), "absent.json")
	for _, path := range []string{bad, missing} {
		_, err := OpenSet(path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("OpenSet(%s) = %v, want an error naming the file", path, err)
		}
	}
}

package licences

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const validRegistry = `{
  "schema_version": 1,
  "entries": [
    {
      "id": "model-a",
      "item": "Model A 1B",
      "kind": "model",
      "licence": "Apache-2.0",
      "source_page": "PyPI model-a 1.0: LICENSE",
      "clause": "Apache-2.0 §2",
      "date_read": "2026-11-30",
      "verdicts": {
        "inference": {"verdict": "allowed", "reading": "use is granted"},
        "distillation": {"verdict": "banned", "reading": "§7 bars distillation", "clause": "§7"}
      }
    }
  ]
}`

func TestParseRegistryValid(t *testing.T) {
	reg, err := ParseRegistry("registry.json", []byte(validRegistry))
	if err != nil {
		t.Fatalf("ParseRegistry: %v", err)
	}
	e, ok := reg.Lookup("model-a")
	if !ok {
		t.Fatal("Lookup(model-a) found nothing")
	}
	if e.Kind != KindModel || e.DateRead != "2026-11-30" {
		t.Errorf("entry = %+v", e)
	}
	if got := e.Verdicts[UseDistillation]; got.Verdict != Banned || got.Clause != "§7" {
		t.Errorf("distillation verdict = %+v", got)
	}
	if _, ok := reg.Lookup("nope"); ok {
		t.Error("Lookup(nope) found an entry")
	}
}

// edit returns validRegistry with one substring replaced, failing the test if
// the substring is absent so a table row cannot silently test the valid file.
func edit(t *testing.T, old, repl string) string {
	t.Helper()
	if !strings.Contains(validRegistry, old) {
		t.Fatalf("test bug: %q not in validRegistry", old)
	}
	return strings.Replace(validRegistry, old, repl, 1)
}

func TestParseRegistryErrors(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		wantField string
		wantText  string
	}{
		{"malformed JSON", `{"schema_version": 1, "entries": [`, "entries", "not valid JSON"},
		{"not an object", `[1,2]`, "(top level)", "must be a JSON object"},
		{"empty file", ``, "(top level)", "not valid JSON"},
		{"trailing data", validRegistry + `{}`, "(top level)", "after the closing brace"},
		{"unknown top field", edit(t, `"schema_version": 1,`, `"schema_version": 1, "extra": true,`), "extra", "unknown field"},
		{"unknown entry field", edit(t, `"item": "Model A 1B",`, `"item": "Model A 1B", "url": "x",`), "entries[0].url", "unknown field"},
		{"unknown verdict field", edit(t, `"reading": "use is granted"`, `"reading": "use is granted", "note": "x"`), "entries[0].verdicts.inference.note", "unknown field"},
		{"unknown use", edit(t, `"inference":`, `"mining":`), "entries[0].verdicts.mining", "is not a use"},
		{"bad verdict", edit(t, `"verdict": "allowed"`, `"verdict": "fine"`), "entries[0].verdicts.inference.verdict", "not a verdict"},
		{"empty reading", edit(t, `"reading": "use is granted"`, `"reading": "  "`), "entries[0].verdicts.inference.reading", "missing or empty"},
		{"missing reading", edit(t, `, "reading": "use is granted"`, ``), "entries[0].verdicts.inference.reading", "is missing"},
		{"bad date format", edit(t, `"2026-11-30"`, `"30/11/2026"`), "entries[0].date_read", "not a date"},
		{"impossible date", edit(t, `"2026-11-30"`, `"2026-02-30"`), "entries[0].date_read", "not a date"},
		{"date years ahead", edit(t, `"2026-11-30"`, `"2099-01-01"`), "entries[0].date_read", `entry "model-a": 2099-01-01 is in the future`},
		{"date not a string", edit(t, `"2026-11-30"`, `20261130`), "entries[0].date_read", "must be a string"},
		{"bad kind", edit(t, `"kind": "model"`, `"kind": "weights"`), "entries[0].kind", "not a kind"},
		{"bad id", edit(t, `"id": "model-a"`, `"id": "Model A"`), "entries[0].id", "not a valid id"},
		{"missing clause", edit(t, `"clause": "Apache-2.0 §2",`, ``), "entries[0].clause", "is missing"},
		{"wrong schema", edit(t, `"schema_version": 1`, `"schema_version": 9`), "schema_version", "not known"},
		{"entries null", `{"schema_version": 1, "entries": null}`, "entries", "must be an array"},
		{"duplicate key", edit(t, `"item": "Model A 1B",`, `"item": "Model A 1B", "item": "B",`), "entries[0].item", "appears twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRegistry("registry.json", []byte(tc.data))
			if err == nil {
				t.Fatal("ParseRegistry accepted bad input")
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Error("errors.Is(err, ErrInvalid) is false")
			}
			if pe.File != "registry.json" || pe.Field != tc.wantField || pe.Fix == "" {
				t.Errorf("got file=%q field=%q fix=%q, want field %q and a fix", pe.File, pe.Field, pe.Fix, tc.wantField)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not say %q", err, tc.wantText)
			}
		})
	}
}

func TestParseRegistryEmptyVerdicts(t *testing.T) {
	data := `{"schema_version":1,"entries":[{"id":"x","item":"X","kind":"tool","licence":"MIT","source_page":"p","clause":"c","date_read":"2026-11-30","verdicts":{}}]}`
	_, err := ParseRegistry("r.json", []byte(data))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Field != "entries[0].verdicts" {
		t.Fatalf("err = %v, want a ParseError on entries[0].verdicts", err)
	}
}

func TestParseRegistryDuplicateID(t *testing.T) {
	e := `{"id":"x","item":"X","kind":"tool","licence":"MIT","source_page":"p","clause":"c","date_read":"2026-11-30","verdicts":{"inference":{"verdict":"allowed","reading":"r"}}}`
	_, err := ParseRegistry("r.json", []byte(`{"schema_version":1,"entries":[`+e+`,`+e+`]}`))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Field != "entries[1].id" || !strings.Contains(pe.Msg, "entries[0]") {
		t.Fatalf("err = %v, want duplicate id on entries[1].id naming entries[0]", err)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	reg, err := ParseRegistry("r.json", []byte(validRegistry))
	if err != nil {
		t.Fatal(err)
	}
	out, err := reg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseRegistry("r.json", out)
	if err != nil {
		t.Fatalf("re-parse of Marshal output: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(reg, again) {
		t.Errorf("round trip changed the registry:\n%+v\n%+v", reg, again)
	}
}

func TestLoadRegistry(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "registry.json")
	if err := os.WriteFile(path, []byte(validRegistry), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := LoadRegistry(path)
	if err != nil || len(reg.Entries) != 1 {
		t.Fatalf("LoadRegistry = %v, %v", reg, err)
	}
	if _, err := LoadRegistry(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want ErrNotExist", err)
	}
}

// TestBundledRegistry checks the shipped registry parses and covers every item
// rig bundles, with a reading for each commonly banned use of each model.
func TestBundledRegistry(t *testing.T) {
	reg, err := Bundled()
	if err != nil {
		t.Fatalf("bundled registry: %v", err)
	}
	onDisk, err := LoadRegistry("registry.json")
	if err != nil {
		t.Fatalf("registry.json on disk: %v", err)
	}
	if reg.File != BundledFile || onDisk.File != "registry.json" {
		t.Errorf("File = %q and %q, want %q and registry.json", reg.File, onDisk.File, BundledFile)
	}
	onDisk.File = reg.File
	if !reflect.DeepEqual(reg, onDisk) {
		t.Error("embedded registry differs from registry.json on disk")
	}
	for _, id := range []string{"smollm2-135m-instruct", "gemma-3-270m", "llama-cpp", "ollama", "aider-chat", "rig-task-banks", "rig-bank-extract-json", "rig-bank-fix-test"} {
		e, ok := reg.Lookup(id)
		if !ok {
			t.Errorf("bundled registry lacks %q", id)
			continue
		}
		if e.Kind != KindModel {
			continue
		}
		for _, u := range Uses() {
			if !u.CommonlyBanned() {
				continue
			}
			if v, ok := e.Verdicts[u]; !ok || v.Reading == "" {
				t.Errorf("%s: no reading for commonly banned use %s", id, u)
			}
		}
	}
}

// TestDateReadInTheFuture: a reading dated after tomorrow (UTC) is refused
// naming the file given, the entry and the field; tomorrow is accepted, for
// a reader whose today is already the UTC tomorrow.
func TestDateReadInTheFuture(t *testing.T) {
	defer func(f func() time.Time) { now = f }(now)
	now = func() time.Time { return time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC) }
	if _, err := ParseRegistry("studio/my-registry.json", []byte(edit(t, `"2026-11-30"`, `"2026-12-01"`))); err != nil {
		t.Fatalf("tomorrow refused: %v", err)
	}
	_, err := ParseRegistry("studio/my-registry.json", []byte(edit(t, `"2026-11-30"`, `"2026-12-02"`)))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Field != "entries[0].date_read" || pe.Fix == "" {
		t.Fatalf("got %v, want a ParseError at entries[0].date_read with a fix", err)
	}
	for _, want := range []string{"studio/my-registry.json", `"model-a"`, "2026-12-02", "today is 2026-11-30"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "licences/registry.json") {
		t.Errorf("error %q names the bundled registry, not the file given", err)
	}
}

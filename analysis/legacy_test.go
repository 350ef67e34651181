package analysis

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"rig/internal/jsonkeys"
)

// tagNames is every JSON name a struct tag in the package's own (non-test)
// source gives.
func tagNames(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if fd, ok := n.(*ast.Field); ok && fd.Tag != nil {
				tag, err := strconv.Unquote(fd.Tag.Value)
				if err != nil {
					t.Fatalf("%s: tag %s: %v", fset.Position(fd.Pos()), fd.Tag.Value, err)
				}
				name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
				if name != "" && name != "-" {
					names[name] = true
					if strings.ContainsFunc(name, unicode.IsUpper) {
						t.Errorf("%s: JSON name %q is not snake_case", fset.Position(fd.Pos()), name)
					}
				}
			}
			return true
		})
	}
	if len(names) < 100 {
		t.Fatalf("found %d JSON names; the parse lost its way", len(names))
	}
	return names
}

// Every legacy name is the old spelling of a field the package still has,
// and every JSON name in the package is snake_case.
func TestLegacyNamesAreFieldNames(t *testing.T) {
	names := tagNames(t)
	for _, l := range legacyNames {
		if !names[jsonkeys.Snake(l)] {
			t.Errorf("legacy name %q: no field is named %q", l, jsonkeys.Snake(l))
		}
		if legacyName(jsonkeys.Snake(l)) != l || currentName(l) != jsonkeys.Snake(l) {
			t.Errorf("legacy name %q does not map both ways", l)
		}
	}
}

// Each field the comparison hash read when it was frozen is still hashed
// under the name it had then: its snake_case name maps back to it.
func TestHashedFieldsKeepTheirLegacyNames(t *testing.T) {
	types := map[string]reflect.Type{}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || types[ty.Name()] != nil {
			return
		}
		types[ty.Name()] = ty
		for i := range ty.NumField() {
			walk(ty.Field(i).Type)
		}
	}
	walk(reflect.TypeFor[Input]())
	for field, want := range hashedFields {
		typ, name, _ := strings.Cut(field, ".")
		ty, ok := types[typ]
		if !ok {
			t.Errorf("%s: the hash no longer reads a %s", field, typ)
			continue
		}
		f, ok := ty.FieldByName(name)
		if !ok {
			t.Errorf("%s: no such field", field)
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if got := legacyName(tag); got != want {
			t.Errorf("%s (JSON %q) is hashed as %q, was %q", field, tag, got, want)
		}
	}
}

// An early-stopping record stored before the move to snake_case (written
// by the code of d51a3cd: testdata/stop_legacy.json) reads in full, and
// one written now reads the same.
func TestSequentialReadsEitherSpelling(t *testing.T) {
	legacy, err := os.ReadFile(filepath.Join("testdata", "stop_legacy.json"))
	if err != nil {
		t.Fatal(err)
	}
	legacy = bytes.TrimSpace(legacy)
	var old Sequential
	if err := json.Unmarshal(legacy, &old); err != nil {
		t.Fatal(err)
	}
	pl := old.Look.Pairs
	if old.Stopping.FutilityBeta != 0.2 || len(old.NotRun) != 2 || len(old.Look.HolmP) != 2 || len(pl) != 2 ||
		pl[0].JobKind != "apply" || pl[0].StoppedAt != 3 || pl[0].CandidateOnly != 36 || pl[0].Stagewise == nil ||
		!pl[0].Path[0].FutilityE.Valid() || pl[0].Path[0].FutilityBound.Valid() {
		t.Fatalf("the legacy record read as %+v", old)
	}
	now, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"holmP"`, `"futilityBeta"`, `"stoppedAt"`, `"jobKind"`} {
		if bytes.Contains(now, []byte(k)) {
			t.Errorf("written now, the record still has %s", k)
		}
	}
	var current Sequential
	if err := json.Unmarshal(now, &current); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(current)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, now) {
		t.Errorf("a record written now reads back differently:\n%s\n%s", now, again)
	}
	// Nothing was lost: spelled the old way, it is the stored bytes again.
	back, err := jsonkeys.Rename(now, reflect.TypeFor[Sequential](), legacyName)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, legacy) {
		t.Errorf("the legacy record read and written the old way differs:\n%s\n%s", back, legacy)
	}
	var null Sequential
	if err := json.Unmarshal([]byte("null"), &null); err != nil || null.Look.Pairs != nil {
		t.Errorf("null read as %+v, %v", null, err)
	}
}

package studies

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// refused are the places, as rig's JSON paths, where the schema finds a value
// wrong: each failed keyword's instance location.
func (c schemaCheck) refused(v any) []string {
	var ve *jsonschema.ValidationError
	if err := c.schema.Validate(v); !errors.As(err, &ve) {
		return nil
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, rigPath(e.InstanceLocation))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// rigPath writes a JSON pointer's tokens as rig's messages do: arms[0].pins.
func rigPath(tokens []string) string {
	var b strings.Builder
	for _, tok := range tokens {
		if _, err := strconv.Atoi(tok); err == nil {
			fmt.Fprintf(&b, "[%s]", tok)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// under reports whether path is at or below at.
func under(path, at string) bool {
	return at == "" || path == at || strings.HasPrefix(path, at+".") || strings.HasPrefix(path, at+"[")
}

// rigRefuses reads data as rig does (ParseDesign, then Validate without the
// file system) and reports whether it refuses something at or below at,
// with every problem's message for the caller to check.
func rigRefuses(data []byte, file, at string) (bool, []Problem, error) {
	d, err := ParseDesign(file, data)
	var ve *ValidationError
	switch {
	case errors.As(err, &ve):
	case err != nil:
		return true, nil, err // the file does not parse: refused as a whole
	default:
		if err := Validate(context.Background(), d, ValidateOptions{File: file}); !errors.As(err, &ve) {
			return false, nil, nil
		}
	}
	hit := false
	for _, p := range ve.Problems {
		hit = hit || schemaKinds[p.Kind] && under(p.Path, at)
	}
	return hit, ve.Problems, nil
}

// schemaKinds are the problems a schema can state: the others are rules
// across fields (a reference to another arm, pins equal across arms, a path
// inside the study's folder) that Validate adds to the schema.
var schemaKinds = map[ProblemKind]bool{KindUnknownField: true, KindWrongType: true, KindMissing: true, KindInvalid: true, KindUnknownRT: true}

// companions are edits a mutation at a path needs so that a rule across
// fields holds and only the value's own bounds are tested: stop_cap is
// below the context, so its largest value needs the largest context.
var companions = map[string]func(m map[string]any){
	"arms[0].pins.stop_cap": func(m map[string]any) { pins(m, 0)["context"] = json.Number(strconv.Itoa(MaxContext)) },
}

func schemaRefuses(c schemaCheck, t *testing.T, data []byte, at string) (bool, []string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return true, []string{err.Error()}
	}
	locs := c.refused(v)
	for _, l := range locs {
		if under(l, at) {
			return true, locs
		}
	}
	return false, locs
}

// maxMessage is the longest problem message a hostile value may cost.
const maxMessage = 4096

// agree checks one document: the schema and rig both refuse something at or
// below at, or neither does; and no message of rig's echoes a value whole.
func agree(t *testing.T, c schemaCheck, name string, data []byte, at string) {
	t.Helper()
	rig, probs, perr := rigRefuses(data, "design.json", at)
	sch, locs := schemaRefuses(c, t, data, at)
	if rig != sch {
		var msgs []string
		for _, p := range probs {
			msgs = append(msgs, p.Error())
		}
		if perr != nil {
			msgs = append(msgs, perr.Error())
		}
		t.Errorf("%s: at %q the schema refuses: %v, rig refuses: %v\nschema's places: %v\nrig's problems:\n%s",
			name, at, sch, rig, locs, clip(strings.Join(msgs, "\n")))
	}
	for _, p := range probs {
		if len(p.Msg) > maxMessage {
			t.Errorf("%s: %s: a message of %d bytes (a long value is quoted by its first characters and its length): %s", name, p.Path, len(p.Msg), clip(p.Msg))
		}
	}
	if perr != nil && len(perr.Error()) > maxMessage {
		t.Errorf("%s: an error of %d bytes: %s", name, len(perr.Error()), clip(perr.Error()))
	}
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return s
}

// TestSchemaAndReaderAgreeOnMutations puts every value of the demo design's
// top level, first job kind and first arm through the edits a hand-edited
// file gets wrong (null, the wrong type, each side of every bound the schema
// states, a whole number written 1.0, numbers past 64 bits, a megabyte
// string, an unknown key) and holds the schema's verdict at that value to
// rig's. The bounds come from the schema, so a bound added to one and not
// the other is found.
func TestSchemaAndReaderAgreeOnMutations(t *testing.T) {
	c := loadSchema(t)
	base := numberTree(t, readDemo(t))
	var leaves [][]any
	collectPaths(base, nil, &leaves)
	n := 0
	for _, p := range leaves {
		if len(p) >= 2 {
			if i, ok := p[1].(int); ok && i > 0 {
				continue // the other arms and job kinds repeat the same shapes
			}
		}
		node := c.nodeAt(t, p)
		for _, m := range mutationsFor(getAt(base, p), node) {
			doc := deepClone(base)
			if edit := companions[pathString(p)]; edit != nil {
				edit(doc.(map[string]any))
			}
			data, err := json.Marshal(setAt(doc, p, m.val))
			if err != nil {
				t.Fatal(err)
			}
			agree(t, c, fmt.Sprintf("%s=%s", pathString(p), m.tag), data, pathString(p))
			n++
		}
	}
	if n < 300 {
		t.Fatalf("only %d mutations: is the demo design complete?", n)
	}
	t.Logf("%d mutations of %d values", n, len(leaves))
}

// TestSchemaAndReaderAgreeOnFixtures: every committed design, the hostile
// corpus's designs included, gets the same verdict from both, at the value
// a corpus case's name says it mutated (design-arms0.pins.context-huge.json
// mutates arms[0].pins.context), or for the whole file.
func TestSchemaAndReaderAgreeOnFixtures(t *testing.T) {
	c := loadSchema(t)
	var files []string
	for _, glob := range []string{"../examples/*/design.json", "../testdata/hostile/designs/design-*.json", "../testdata/hostile/valid/designs/*.json"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 50 {
		t.Fatalf("%d design fixtures: is testdata/hostile committed?", len(files))
	}
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(data) {
			continue // not JSON at all: the schema has nothing to say
		}
		at, ok := corpusPath(filepath.Base(f))
		if !ok {
			continue
		}
		var pe *ParseError
		if _, err := ParseDesign("design.json", data); errors.As(err, &pe) {
			// Refused before any field is read (a key given twice, which a
			// JSON Schema validator cannot see): not the schema's business.
			if at != "" {
				t.Errorf("%s: refused as a whole, not at %s: %v", f, at, err)
			}
			continue
		}
		agree(t, c, f, data, at)
		checked++
	}
	yamlDoc, err := toJSON("design.yaml", ExampleDesign())
	if err != nil {
		t.Fatal(err)
	}
	agree(t, c, "init example", yamlDoc, "")
	t.Logf("%d fixtures", checked+1)
}

// corpusPath reads the mutated value's path from a hostile corpus case's
// name (design-PATH-TAG.json, list indexes written after the key as in
// arms0); a "missing" case is left out: a required field rig reads as its
// zero value is the rule checks' business, not the schema's shape. A name
// not in that form (a whole valid design) is checked as a whole.
func corpusPath(name string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSuffix(name, ".json"), "design-")
	if !ok {
		return "", true
	}
	i := strings.LastIndex(rest, "-")
	if i < 0 {
		return "", true
	}
	path, tag := rest[:i], rest[i+1:]
	first, _, _ := strings.Cut(path, ".")
	first = strings.TrimRight(first, "0123456789")
	if _, field := jsonFields(reflect.TypeFor[Design]())[first]; !field {
		return "", true // a file-level case (design-top-null.json)
	}
	if tag == "missing" {
		return "", false
	}
	var b strings.Builder
	for j, seg := range strings.Split(path, ".") {
		k := len(seg)
		for k > 0 && seg[k-1] >= '0' && seg[k-1] <= '9' {
			k--
		}
		if j > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg[:k])
		if k < len(seg) {
			fmt.Fprintf(&b, "[%s]", seg[k:])
		}
	}
	return b.String(), true
}

// nodeAt is the schema node describing the value at p.
func (c schemaCheck) nodeAt(t *testing.T, p []any) map[string]any {
	t.Helper()
	node := c.root
	deref := func(n map[string]any) map[string]any {
		if ref, ok := n["$ref"].(string); ok {
			return c.root["$defs"].(map[string]any)[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		return n
	}
	for _, seg := range p {
		node = deref(node)
		var next map[string]any
		switch s := seg.(type) {
		case string:
			next, _ = node["properties"].(map[string]any)[s].(map[string]any)
		case int:
			next, _ = node["items"].(map[string]any)
		}
		if next == nil {
			t.Fatalf("%s: no schema node", pathString(p))
		}
		node = next
	}
	return deref(node)
}

type mutation struct {
	tag string
	val any
}

// mutationsFor lists the edits of one value, its bounds read from node.
func mutationsFor(orig any, node map[string]any) []mutation {
	out := []mutation{{"null", nil}}
	typ, _ := node["type"].(string)
	num := func(s string) json.Number { return json.Number(s) }
	switch {
	case typ == "integer":
		out = append(out,
			mutation{"string", "7"}, mutation{"fraction", num("1.5")}, mutation{"whole-with-fraction", num(string(orig.(json.Number)) + ".0")},
			mutation{"exponent", num(string(orig.(json.Number)) + "e0")},
			mutation{"2^63-1", num("9223372036854775807")}, mutation{"2^63", num("9223372036854775808")},
			mutation{"2^64", num("18446744073709551616")}, mutation{"-2^63-1", num("-9223372036854775809")},
			mutation{"tiny-fraction", num("1.0000000000000000000001")}, mutation{"huge-exponent", num("1e999999999")},
			mutation{"negative-huge-exponent", num("1e-999999999")})
		for _, k := range []string{"minimum", "maximum"} {
			if b, ok := node[k].(float64); ok {
				i := new(big.Int).SetInt64(int64(b))
				out = append(out, mutation{k, num(i.String())},
					mutation{k + "-1", num(new(big.Int).Sub(i, big.NewInt(1)).String())},
					mutation{k + "+1", num(new(big.Int).Add(i, big.NewInt(1)).String())})
			}
		}
	case typ == "number":
		out = append(out, mutation{"string", "0.5"}, mutation{"huge", num("1e400")})
		for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if b, ok := node[k].(float64); ok {
				s := strconv.FormatFloat(b, 'g', -1, 64)
				out = append(out, mutation{k, num(s)},
					mutation{k + "-0.001", num(strconv.FormatFloat(b-0.001, 'g', -1, 64))},
					mutation{k + "+0.001", num(strconv.FormatFloat(b+0.001, 'g', -1, 64))})
			}
		}
	case typ == "string":
		out = append(out, mutation{"number", num("7")}, mutation{"empty", ""},
			mutation{"megabyte", strings.Repeat("a", 1<<20)}, mutation{"list", []any{}})
	case typ == "boolean":
		out = append(out, mutation{"string", "yes"}, mutation{"number", num("1")})
	case node["enum"] != nil:
		out = append(out, mutation{"not-in-enum", "no-such-" + strings.Repeat("x", 1<<20)}, mutation{"number", num("7")})
	case typ == "object":
		out = append(out, mutation{"list", []any{}}, mutation{"unknown-key", map[string]any{"surplus_field": num("1")}})
	case typ == "array":
		out = append(out, mutation{"object", map[string]any{}}, mutation{"string", "[]"})
	}
	return out
}

// numberTree decodes JSON keeping numbers as written.
func numberTree(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// collectPaths lists the path of every value in v, containers included.
func collectPaths(v any, prefix []any, out *[][]any) {
	if len(prefix) > 0 {
		*out = append(*out, append([]any(nil), prefix...))
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			collectPaths(x[k], append(prefix, k), out)
		}
	case []any:
		for i, e := range x {
			collectPaths(e, append(prefix, i), out)
		}
	}
}

func getAt(v any, p []any) any {
	for _, seg := range p {
		switch s := seg.(type) {
		case string:
			v = v.(map[string]any)[s]
		case int:
			v = v.([]any)[s]
		}
	}
	return v
}

func setAt(root any, p []any, val any) any {
	parent := getAt(root, p[:len(p)-1])
	switch s := p[len(p)-1].(type) {
	case string:
		parent.(map[string]any)[s] = val
	case int:
		parent.([]any)[s] = val
	}
	return root
}

func deepClone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepClone(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepClone(e)
		}
		return s
	}
	return v
}

func pathString(p []any) string {
	var b strings.Builder
	for _, seg := range p {
		switch s := seg.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		}
	}
	return b.String()
}

// TestWholeNumbersWrittenWithAFraction: 1.0 is the whole number 1, as the
// schema's "integer" says and YAML users write it, in JSON and in YAML.
func TestWholeNumbersWrittenWithAFraction(t *testing.T) {
	data := mutated(t, func(m map[string]any) {
		m["repeats"] = json.Number("2.0")
		jobKind(m, 0)["grader"].(map[string]any)["version"] = json.Number("1.0")
		pins(m, 0)["context"] = json.Number("4.096e3")
	})
	for _, file := range []string{"design.json", "design.yaml"} {
		d, err := ParseDesign(file, data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if d.Repeats != 2 || d.JobKinds[0].Grader.Version != 1 || d.Arms[0].Pins.Context != 4096 {
			t.Errorf("%s: repeats %d, grader.version %d, context %d; want 2, 1, 4096", file, d.Repeats, d.JobKinds[0].Grader.Version, d.Arms[0].Pins.Context)
		}
	}
	d, err := ParseDesign("design.yaml", []byte("name: x\nrepeats: 1.0\n"))
	if err != nil || d.Repeats != 1 {
		t.Errorf("YAML repeats: 1.0 read as %+v, %v; want 1", d, err)
	}
}

// TestLongValuesAreQuotedShort: a megabyte value costs its first characters
// and its length in every message that names it, not a megabyte.
func TestLongValuesAreQuotedShort(t *testing.T) {
	long := strings.Repeat("A", 1<<20)
	data := mutated(t, func(m map[string]any) {
		arm(m, 0)["name"] = long
		arm(m, 1)["runtime"] = long
		arm(m, 1)["job_kinds"] = []any{long}
		other := strings.Repeat("B", len(long))
		m["pairs"] = []any{map[string]any{"challenger": other, "incumbent": other}}
		m["card_profile"].(map[string]any)["name"] = long
	})
	_, err := ParseDesign("design.json", data)
	if err == nil {
		d, _ := ParseDesign("design.json", data)
		err = Validate(context.Background(), d, ValidateOptions{})
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError, got %v", err)
	}
	for _, want := range []string{"arms[0].name", "arms[1].runtime", "arms[1].job_kinds[0]", "pairs[0].challenger", "card_profile.name"} {
		found := false
		for _, p := range ve.Problems {
			if p.Path != want {
				continue
			}
			found = true
			if len(p.Msg) > maxMessage || !strings.Contains(p.Msg, fmt.Sprintf("(%d bytes)", len(long))) {
				t.Errorf("%s: %d bytes, want the value cut and its length said: %s", want, len(p.Msg), clip(p.Msg))
			}
		}
		if !found {
			t.Errorf("no problem at %s in:\n%s", want, clip(err.Error()))
		}
	}
}

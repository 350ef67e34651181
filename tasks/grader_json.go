package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// jsonKey is the key of a JSON extraction task: the expected fields and an
// optional schema (a small JSON Schema subset: required and property types).
type jsonKey struct {
	Fields map[string]any `json:"fields"`
	Schema *jsonSchema    `json:"schema,omitempty"`
}

type jsonSchema struct {
	Type       string                  `json:"type,omitempty"`
	Required   []string                `json:"required,omitempty"`
	Properties map[string]jsonProperty `json:"properties,omitempty"`
}

type jsonProperty struct {
	Type string `json:"type"`
}

var jsonTypes = map[string]bool{"string": true, "number": true, "integer": true, "boolean": true, "array": true, "object": true, "null": true}

func readJSONKey(t Task) (jsonKey, error) {
	var k jsonKey
	if err := decodeKey(t, &k); err != nil {
		return k, err
	}
	if len(k.Fields) == 0 {
		return k, errors.New("key.fields is empty")
	}
	if s := k.Schema; s != nil {
		if s.Type != "" && s.Type != "object" {
			return k, fmt.Errorf("key.schema.type %q: only object is supported", s.Type)
		}
		for name, p := range s.Properties {
			if !jsonTypes[p.Type] {
				return k, fmt.Errorf("key.schema.properties.%s.type %q is not a JSON type", name, p.Type)
			}
		}
		if errs := s.check(k.Fields); len(errs) > 0 {
			return k, fmt.Errorf("key.fields do not fit key.schema: %s", strings.Join(errs, "; "))
		}
	}
	return k, nil
}

// JSONMatch reads the first JSON object in the output (also inside
// ```json fences or after prose), checks it against the schema and compares
// each expected field. Score is the fraction of fields that match; it
// passes when the schema holds and every field matches.
type JSONMatch struct{}

func (JSONMatch) Name() string { return "json" }
func (JSONMatch) Version() int { return 1 }

func (JSONMatch) CheckKey(t Task) error { _, err := readJSONKey(t); return err }

func (JSONMatch) KeyOutput(t Task) (Output, error) {
	k, err := readJSONKey(t)
	if err != nil {
		return Output{}, err
	}
	b, err := json.Marshal(k.Fields)
	return Output{TaskID: t.ID, Text: string(b)}, err
}

func (JSONMatch) Grade(_ context.Context, t Task, out Output) (Grade, error) {
	k, err := readJSONKey(t)
	if err != nil {
		return Grade{}, err
	}
	obj, ok := FirstJSONObject(out.Text)
	if !ok {
		return Grade{Score: 0, Details: map[string]any{"parsed": false, "fields": len(k.Fields)}}, nil
	}
	names := make([]string, 0, len(k.Fields))
	for n := range k.Fields {
		names = append(names, n)
	}
	sort.Strings(names)
	var matched, missed []string
	for _, n := range names {
		got, present := lookupField(obj, n)
		if present && valuesMatch(k.Fields[n], got) {
			matched = append(matched, n)
		} else {
			missed = append(missed, n)
		}
	}
	var schemaErrs []string
	if k.Schema != nil {
		schemaErrs = k.Schema.check(obj)
	}
	score := float64(len(matched)) / float64(len(names))
	return Grade{
		Score: score,
		Pass:  len(missed) == 0 && len(schemaErrs) == 0,
		Details: map[string]any{
			"parsed": true, "fields": len(names), "matched": matched,
			"missed": missed, "schema_errors": schemaErrs,
		},
	}, nil
}

// check validates obj against the schema with a JSON Schema 2020-12
// validator. The grader finds a field by its exact name or a normalized one
// ("Invoice Number" for invoice_number), which JSON Schema does not, so the
// object is first read under the schema's own names; what is reported keeps
// the grader's wording, sorted, so a grade's detail reads as it always has.
func (s *jsonSchema) check(obj map[string]any) []string {
	named := map[string]any{}
	props := map[string]any{}
	for _, n := range s.Required {
		if v, ok := lookupField(obj, n); ok {
			named[n] = v
		}
	}
	for n, p := range s.Properties {
		if v, ok := lookupField(obj, n); ok {
			named[n] = v
		}
		props[n] = map[string]any{"type": p.Type}
	}
	required := make([]any, len(s.Required))
	for i, r := range s.Required {
		required[i] = r
	}
	doc := map[string]any{"type": "object", "required": required, "properties": props}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("key.schema.json", doc); err != nil {
		return []string{"key.schema: " + err.Error()}
	}
	sch, err := c.Compile("key.schema.json")
	if err != nil {
		return []string{"key.schema: " + err.Error()}
	}
	var ve *jsonschema.ValidationError
	if err := sch.Validate(named); err == nil {
		return nil
	} else if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	missing := map[string]bool{}
	var types []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				missing[m] = true
			}
		case *kind.Type:
			if len(e.InstanceLocation) == 1 {
				types = append(types, fmt.Sprintf("field %q is not a %s", e.InstanceLocation[0], strings.Join(k.Want, " or ")))
			}
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	// Missing fields in the schema's order, then types by field name.
	var errs []string
	for _, r := range s.Required {
		if missing[r] {
			errs = append(errs, fmt.Sprintf("required field %q missing", r))
		}
	}
	sort.Strings(types)
	return append(errs, types...)
}

// FirstJSONObject finds the first balanced {...} in text that parses as a
// JSON object. Models wrap JSON in fences or prose; only the object counts.
func FirstJSONObject(text string) (map[string]any, bool) {
	for i := 0; i < len(text); i++ {
		if text[i] != '{' {
			continue
		}
		end := matchBrace(text, i)
		if end < 0 {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(text[i : end+1]))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err == nil {
			return obj, true
		}
	}
	return nil, false
}

// matchBrace returns the index of the brace closing the one at start,
// skipping braces inside JSON strings, or -1.
func matchBrace(s string, start int) int {
	depth, inStr, esc := 0, false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case inStr && c == '"':
			inStr = false
		case inStr:
		case c == '"':
			inStr = true
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// lookupField finds a field by exact name, then by a name equal after
// normalization ("Invoice Number" for invoice_number).
func lookupField(obj map[string]any, name string) (any, bool) {
	if v, ok := obj[name]; ok {
		return v, true
	}
	want := normalize(strings.ReplaceAll(name, "_", " "))
	for k, v := range obj {
		if normalize(strings.ReplaceAll(k, "_", " ")) == want {
			return v, true
		}
	}
	return nil, false
}

// valuesMatch compares an expected key value with a produced one: strings
// after normalization, numbers by value (also when written as a string such
// as "$1,250.00"), arrays as multisets, objects field by field.
func valuesMatch(want, got any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case bool:
		switch g := got.(type) {
		case bool:
			return g == w
		case string:
			n := normalize(g)
			return (w && (n == "true" || n == "yes")) || (!w && (n == "false" || n == "no"))
		}
		return false
	case json.Number, float64:
		wf, ok := toFloat(w)
		if !ok {
			return false
		}
		gf, ok := toFloat(got)
		return ok && math.Abs(wf-gf) <= 1e-9*math.Max(1, math.Abs(wf))
	case string:
		switch g := got.(type) {
		case string:
			return normalize(g) == normalize(w)
		case json.Number:
			return normalize(g.String()) == normalize(w)
		}
		return false
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		used := make([]bool, len(g))
	next:
		for _, wv := range w {
			for j, gv := range g {
				if !used[j] && valuesMatch(wv, gv) {
					used[j] = true
					continue next
				}
			}
			return false
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for name, wv := range w {
			gv, present := lookupField(g, name)
			if !present || !valuesMatch(wv, gv) {
				return false
			}
		}
		return true
	}
	return false
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case string:
		s := strings.TrimSpace(x)
		if !strings.ContainsAny(s, "0123456789") {
			return 0, false
		}
		// Accept currency and unit decoration around exactly one number.
		if len(numberPattern.FindAllString(s, -1)) != 1 {
			return 0, false
		}
		return lastNumber(s)
	}
	return 0, false
}

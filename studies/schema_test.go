package studies

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaCheck validates documents against the published design schema
// with a maintained JSON Schema 2020-12 validator, and keeps the schema as a
// map for the walk that holds it to the Go type.
type schemaCheck struct {
	root   map[string]any
	schema *jsonschema.Schema
}

// validate lists what is wrong with v, one line per failed keyword, with its
// place in the document.
func (c schemaCheck) validate(v any) []string {
	err := c.schema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, e.Error()) // "at '/arms/0/runtime': value must be one of …"
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

func loadSchema(t *testing.T) schemaCheck {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(DesignSchema(), &root); err != nil {
		t.Fatalf("embedded schema is not JSON: %v", err)
	}
	if root["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v, want draft 2020-12", root["$schema"])
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(DesignSchema()))
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	comp.AssertFormat()
	if err := comp.AddResource("design.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := comp.Compile("design.schema.json")
	if err != nil {
		t.Fatalf("the published design schema does not compile: %v", err)
	}
	return schemaCheck{root: root, schema: sch}
}

// document reads JSON as the validator wants it (numbers kept exact).
func document(t *testing.T, data []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSchemaAcceptsExamples(t *testing.T) {
	c := loadSchema(t)
	yamlDoc, err := toJSON("design.yaml", ExampleDesign())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"bundled demo": readDemo(t), "init example": yamlDoc} {
		if errs := c.validate(document(t, data)); len(errs) > 0 {
			t.Errorf("%s fails the schema:\n%s", name, strings.Join(errs, "\n"))
		}
	}
}

func TestSchemaRejects(t *testing.T) {
	c := loadSchema(t)
	tests := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"unknown field", func(m map[string]any) { pins(m, 2)["quantisation"] = "Q4_1" }, `at '/arms/2/pins': additional properties 'quantisation' not allowed`},
		{"unknown runtime", func(m map[string]any) { arm(m, 0)["runtime"] = "vllm" }, "at '/arms/0/runtime': value must be one of 'ollama'"},
		{"repeats zero", func(m map[string]any) { m["repeats"] = 0 }, "minimum"},
		{"missing sentences", func(m map[string]any) { delete(m, "sentences") }, "missing property 'sentences'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := c.validate(document(t, mutated(t, tc.edit)))
			if !strings.Contains(strings.Join(errs, "\n"), tc.want) {
				t.Errorf("schema errors %v, want one containing %q", errs, tc.want)
			}
		})
	}
}

// TestSchemaMatchesDesignType keeps the published schema and the Go type in
// step: every JSON field of the type is in the schema and the other way round.
func TestSchemaMatchesDesignType(t *testing.T) {
	c := loadSchema(t)
	var walk func(s map[string]any, typ reflect.Type, path string)
	walk = func(s map[string]any, typ reflect.Type, path string) {
		if ref, ok := s["$ref"].(string); ok {
			s = c.root["$defs"].(map[string]any)[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		switch typ.Kind() {
		case reflect.Struct:
			props, _ := s["properties"].(map[string]any)
			fields := jsonFields(typ)
			for name, f := range fields {
				ps, ok := props[name].(map[string]any)
				if !ok {
					t.Errorf("%s.%s is in the Go type but not the schema", path, name)
					continue
				}
				walk(ps, f.Type, path+"."+name)
			}
			for name := range props {
				if _, ok := fields[name]; !ok {
					t.Errorf("%s.%s is in the schema but not the Go type", path, name)
				}
			}
		case reflect.Slice:
			if is, ok := s["items"].(map[string]any); ok {
				walk(is, typ.Elem(), path+"[]")
			}
		}
	}
	walk(c.root, reflect.TypeFor[Design](), "$")
}

// TestSchemaNamesTheDesignsWords: the schema lists the stopping rule's
// methods and spending functions and the guardrail metrics and receipt
// fields that studies keeps (run's and report/findings' tests hold those to
// analysis's), so an editor offers exactly what validation accepts.
func TestSchemaNamesTheDesignsWords(t *testing.T) {
	defs := loadSchema(t).root["$defs"].(map[string]any)
	prop := func(def, name string) map[string]any {
		return defs[def].(map[string]any)["properties"].(map[string]any)[name].(map[string]any)
	}
	for _, c := range []struct {
		name string
		want []any
	}{
		{"method", []any{StopAnytime, StopGroupSequential}},
		{"spending", []any{SpendOBrienFleming, SpendPocock}},
	} {
		if got := prop("stopping", c.name)["enum"]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("schema's stopping.%s enum %v, studies names %v", c.name, got, c.want)
		}
	}
	want := "^(" + strings.Join(GuardrailMetrics, "|") + "|" + strings.ReplaceAll(ReceiptMetricPrefix, ".", `\.`) + "(" + strings.Join(ReceiptMetricFields, "|") + "))$"
	if got := prop("guardrail", "metric")["pattern"]; got != want {
		t.Errorf("schema's guardrail metric pattern\n%v\nstudies' words make\n%v", got, want)
	}
}

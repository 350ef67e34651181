package studies

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// schemaCheck applies the subset of JSON Schema 2020-12 that the design
// schema uses; it fails loudly on a keyword it does not know, so the schema
// cannot grow a rule this test silently ignores.
type schemaCheck struct {
	root map[string]any
}

var knownKeywords = []string{"$schema", "$id", "title", "description", "type", "additionalProperties",
	"required", "properties", "$defs", "$ref", "items", "minItems", "maxItems", "enum", "pattern", "minLength",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}

func (c schemaCheck) validate(s map[string]any, v any, path string) []string {
	for k := range s {
		if !slices.Contains(knownKeywords, k) {
			return []string{fmt.Sprintf("%s: schema keyword %q not understood by the test", path, k)}
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		def, ok := c.root["$defs"].(map[string]any)[name].(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: dangling $ref %q", path, ref)}
		}
		return c.validate(def, v, path)
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, args...)) }
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		fail("%v not in %v", v, enum)
	}
	switch s["type"] {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			fail("not an object")
			return errs
		}
		props, _ := s["properties"].(map[string]any)
		required, _ := s["required"].([]any) // an object may require nothing (harness_caps)
		for _, r := range required {
			if _, ok := m[r.(string)]; !ok {
				fail("missing required %q", r)
			}
		}
		for k, val := range m {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					fail("additional property %q", k)
				}
				continue
			}
			errs = append(errs, c.validate(ps, val, path+"."+k)...)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			fail("not an array")
			return errs
		}
		if mi, ok := s["minItems"].(float64); ok && float64(len(a)) < mi {
			fail("%d items, want at least %v", len(a), mi)
		}
		if mx, ok := s["maxItems"].(float64); ok && float64(len(a)) > mx {
			fail("%d items, want at most %v", len(a), mx)
		}
		if is, ok := s["items"].(map[string]any); ok {
			for i, e := range a {
				errs = append(errs, c.validate(is, e, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			fail("not a string")
			return errs
		}
		if ml, ok := s["minLength"].(float64); ok && float64(len(str)) < ml {
			fail("shorter than %v", ml)
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			fail("%q does not match %s", str, p)
		}
	case "integer", "number":
		n, ok := v.(float64)
		if !ok {
			fail("not a number")
			return errs
		}
		if s["type"] == "integer" && n != float64(int64(n)) {
			fail("%v is not an integer", n)
		}
		if x, ok := s["minimum"].(float64); ok && n < x {
			fail("%v < minimum %v", n, x)
		}
		if x, ok := s["maximum"].(float64); ok && n > x {
			fail("%v > maximum %v", n, x)
		}
		if x, ok := s["exclusiveMinimum"].(float64); ok && n <= x {
			fail("%v <= exclusiveMinimum %v", n, x)
		}
		if x, ok := s["exclusiveMaximum"].(float64); ok && n >= x {
			fail("%v >= exclusiveMaximum %v", n, x)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			fail("not a boolean")
		}
	case nil:
		// enum-only schemas
	default:
		fail("schema type %v not understood by the test", s["type"])
	}
	return errs
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
	return schemaCheck{root: root}
}

func TestSchemaAcceptsExamples(t *testing.T) {
	c := loadSchema(t)
	yamlDoc, err := toJSON("design.yaml", ExampleDesign())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"bundled demo": readDemo(t), "init example": yamlDoc} {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		if errs := c.validate(c.root, v, "$"); len(errs) > 0 {
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
		{"unknown field", func(m map[string]any) { pins(m, 2)["quantisation"] = "Q4_1" }, `additional property "quantisation"`},
		{"unknown runtime", func(m map[string]any) { arm(m, 0)["runtime"] = "vllm" }, "vllm not in"},
		{"repeats zero", func(m map[string]any) { m["repeats"] = 0 }, "minimum"},
		{"missing sentences", func(m map[string]any) { delete(m, "sentences") }, `missing required "sentences"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal(mutated(t, tc.edit), &v); err != nil {
				t.Fatal(err)
			}
			errs := c.validate(c.root, v, "$")
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

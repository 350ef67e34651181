package tasks

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestJSONSchemaCheck holds the json grader's schema check to its meaning:
// required fields and property types, a field found by its exact name or a
// normalized one, integers by value, and the same wording in a grade's
// detail whatever validates underneath.
func TestJSONSchemaCheck(t *testing.T) {
	s := &jsonSchema{Type: "object", Required: []string{"invoice_number", "total", "paid"},
		Properties: map[string]jsonProperty{"invoice_number": {Type: "string"}, "total": {Type: "number"},
			"items": {Type: "integer"}, "paid": {Type: "boolean"}, "notes": {Type: "null"}}}
	cases := []struct {
		name, output string
		want         []string
	}{
		{"exact names", `{"invoice_number": "A-1", "total": 12.5, "items": 3, "paid": true}`, nil},
		{"normalized names", `{"Invoice Number": "A-1", "Total": 12, "Paid": false}`, nil},
		{"an integer written with a zero fraction", `{"invoice_number": "A-1", "total": 1, "items": 3.0, "paid": true}`, nil},
		{"a fraction is no integer", `{"invoice_number": "A-1", "total": 1, "items": 2.5, "paid": true}`,
			[]string{`field "items" is not a integer`}},
		{"missing in the schema's order", `{"paid": true}`,
			[]string{`required field "invoice_number" missing`, `required field "total" missing`}},
		{"wrong types by name", `{"invoice_number": 7, "total": "12", "paid": "yes", "notes": null}`,
			[]string{`field "invoice_number" is not a string`, `field "paid" is not a boolean`, `field "total" is not a number`}},
		{"both", `{"total": [1], "paid": true}`,
			[]string{`required field "invoice_number" missing`, `field "total" is not a number`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tc.output))
			dec.UseNumber()
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				t.Fatal(err)
			}
			if got := s.check(obj); !slices.Equal(got, tc.want) {
				t.Errorf("check gives %q, want %q", got, tc.want)
			}
			// The grader reads outputs as float64 too (FirstJSONObject).
			var plain map[string]any
			_ = json.Unmarshal([]byte(tc.output), &plain)
			if got := s.check(plain); !slices.Equal(got, tc.want) {
				t.Errorf("with float64 numbers: check gives %q, want %q", got, tc.want)
			}
		})
	}
}

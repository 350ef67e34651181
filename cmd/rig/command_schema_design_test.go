package main

import (
	"encoding/json"
	"testing"
)

func TestSchemaCommands(t *testing.T) {
	tests := []struct {
		args     []string
		property string // a top-level property the schema must describe
	}{
		{[]string{"schema", "design"}, "arms"},
		{[]string{"schema", "generations"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.args[1], func(t *testing.T) {
			out, err := runRig(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			var s map[string]any
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatalf("output is not JSON: %v\n%.200s", err, out)
			}
			if _, ok := s["$schema"]; !ok {
				t.Errorf("schema lacks $schema: %.200s", out)
			}
			if tt.property != "" {
				props, _ := s["properties"].(map[string]any)
				if _, ok := props[tt.property]; !ok {
					t.Errorf("schema properties lack %q", tt.property)
				}
			}
		})
	}
	if _, err := runRig(t, "schema", "design", "extra"); err == nil {
		t.Error("schema design accepted an argument")
	}
}

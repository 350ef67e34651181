package main

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// What rig schema bank prints is a schema a studio can check a bank's
// lines with: it compiles, takes the bundled bank's header and first task,
// and refuses a task without its key and a header of another format.
func TestSchemaBankPrintsAUsableSchema(t *testing.T) {
	out, err := runRig(t, "schema", "bank")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("rig schema bank printed no JSON: %v\n%.300s", err, out)
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("bank.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := comp.Compile("bank.schema.json")
	if err != nil {
		t.Fatalf("the printed schema does not compile: %v", err)
	}
	lines := bankLines(t, extractBank)
	for _, c := range []struct {
		line  string
		valid bool
	}{
		{lines[0], true},
		{lines[1], true},
		{strings.Replace(lines[1], `"key":`, `"answer":`, 1), false},
		{`{"schema_version": 2, "job_kind": "qa", "bank_version": "1"}`, false},
		{`{"input": "What is 2+2?", "target": "4"}`, false},
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(c.line))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); (err == nil) != c.valid {
			t.Errorf("line %.80s: valid %v, want %v (%v)", c.line, err == nil, c.valid, err)
		}
	}
	if _, err := runRig(t, "schema", "bank", "extra"); err == nil {
		t.Error("rig schema bank accepted an argument")
	}
}

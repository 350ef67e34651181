package main

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// What rig schema policy prints is a schema a studio can check its policy
// file with: it compiles, takes a valid policy and refuses an unknown role.
func TestSchemaPolicyPrintsAUsableSchema(t *testing.T) {
	out, err := runRig(t, "schema", "policy")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("rig schema policy printed no JSON: %v\n%s", err, out)
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("policy.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := comp.Compile("policy.schema.json")
	if err != nil {
		t.Fatalf("the printed schema does not compile: %v", err)
	}
	for _, c := range []struct {
		policy string
		valid  bool
	}{
		{`{"schema_version": 1, "socket_group": "rig", "grants": [{"user": "dana", "roles": ["director"]}, {"group": "lab", "roles": ["staff", "reviewer"]}]}`, true},
		{`{"schema_version": 1, "grants": [{"user": "dana", "roles": ["admin"]}]}`, false},
		{`{"schema_version": 1, "grants": [{"user": "dana", "group": "lab", "roles": ["staff"]}]}`, false},
		{`{"schema_version": 1, "grants": []}`, false},
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(c.policy))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); (err == nil) != c.valid {
			t.Errorf("policy %s: valid %v, want %v (%v)", c.policy, err == nil, c.valid, err)
		}
	}
	if _, err := runRig(t, "schema", "policy", "extra"); err == nil || !strings.Contains(err.Error(), `unknown command "extra"`) {
		t.Errorf("rig schema policy extra = %v; want refused", err)
	}
}

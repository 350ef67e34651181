package main

import (
	"bytes"
	"testing"

	"rig/genrecord"
)

func TestSchemaGenerationsPrintsGenrecordSchema(t *testing.T) {
	out, err := runRig(t, "schema", "generations")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal([]byte(out), genrecord.Schema()) {
		t.Errorf("rig schema generations differs from genrecord.Schema() (%d vs %d bytes)", len(out), len(genrecord.Schema()))
	}
}

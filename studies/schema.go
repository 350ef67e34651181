package studies

import (
	"bytes"
	_ "embed"
)

//go:embed schema/design.schema.json
var designSchema []byte

// DesignSchema returns the JSON Schema (draft 2020-12) of a design file, as
// `rig schema design` prints it for editors. The schema states the shape;
// Validate adds the rules that span fields.
func DesignSchema() []byte { return bytes.Clone(designSchema) }

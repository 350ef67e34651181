package studies

import (
	"bytes"
	_ "embed"
)

//go:embed schema/example-design.yaml
var exampleDesign []byte

// ExampleDesign returns a commented example design, in YAML so that it can
// carry comments, for `rig study init` to write out for a newcomer to edit.
// It parses and validates as it stands.
func ExampleDesign() []byte { return bytes.Clone(exampleDesign) }

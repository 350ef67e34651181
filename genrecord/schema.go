package genrecord

import _ "embed"

//go:embed schema.json
var schema []byte

// Schema returns the JSON Schema (draft 2020-12) of one generations.jsonl
// line, for `rig schema generations` and outside replay tools.
func Schema() []byte { return append([]byte(nil), schema...) }

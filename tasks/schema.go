package tasks

import (
	"bytes"
	_ "embed"
)

//go:embed schema/bank.schema.json
var bankSchema []byte

// BankSchema returns the JSON Schema (draft 2020-12) of one line of a bank,
// the header or a task, as `rig schema bank` prints it. The schema states
// each line's shape; ParseBank adds the rules across lines (header first,
// unique ids, one job kind) and the grader checks each key's shape.
func BankSchema() []byte { return bytes.Clone(bankSchema) }

package fidelity

import (
	"errors"
	"fmt"

	"rig/genrecord"
)

// ErrUnscorableRow is a kept row with nothing to score in context: no
// output, or no prompt to hold it to. A study leaves its task out.
var ErrUnscorableRow = errors.New("the row cannot be scored")

// RowSegment is a kept row of the reference arm as a segment under unit (its
// task): the rendered prompt's token ids as context and the kept output ids
// scored, so every arm is held to the reference on the text the reference
// itself produced. The step from a study's receipts to the task of each row
// is the caller's (run's fidelity step); a row with no ids goes through a
// RowTokenizer instead.
func RowSegment(unit string, row genrecord.Row) (Segment, error) {
	if len(row.PromptTokenIDs) == 0 {
		return Segment{}, fmt.Errorf("%w: row %s keeps no prompt token ids, so its output cannot be scored in context (a record from llama-server keeps them)", ErrUnscorableRow, row.RowID)
	}
	ids, ok := row.TokenIDs()
	if !ok || len(ids) == 0 {
		return Segment{}, fmt.Errorf("%w: row %s: a kept step has no token id, or none was kept, so its output cannot be scored", ErrUnscorableRow, row.RowID)
	}
	toks := append(append(make([]int, 0, len(row.PromptTokenIDs)+len(ids)), row.PromptTokenIDs...), ids...)
	return Segment{Unit: unit, Context: len(row.PromptTokenIDs), Tokens: toks}, nil
}

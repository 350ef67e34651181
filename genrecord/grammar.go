package genrecord

import (
	"fmt"
	"strconv"
	"strings"
)

// ForcedGrammar returns a GBNF grammar that accepts exactly the given token
// sequence, written as llama.cpp token-id literals: root ::= <[52]> <[40]>.
// llama-server then re-scores a kept output in one request: every step is
// forced, and n_probs reports the pre-sampling log-probs at each step. The
// literal syntax is parsed by parse_token in llama.cpp's
// src/llama-grammar.cpp ('<' '[' digits ']' '>'); ids must be non-negative
// (the Reader rejects negative ids, and llama.cpp refuses the grammar).
// An empty sequence gives root ::= "" (accepts only end of generation).
func ForcedGrammar(tokenIDs []int) string {
	if len(tokenIDs) == 0 {
		return `root ::= ""`
	}
	var b strings.Builder
	b.Grow(len("root ::=") + len(tokenIDs)*9)
	b.WriteString("root ::=")
	for _, id := range tokenIDs {
		b.WriteString(" <[")
		b.WriteString(strconv.Itoa(id))
		b.WriteString("]>")
	}
	return b.String()
}

// ForcedTokens returns the token ids a forced replay puts in the grammar,
// and whether the row's last step was left out as an end-of-generation
// token. llama.cpp never matches an end-of-generation token against an id
// literal (llama_grammar_apply_impl masks it until the grammar is complete),
// so forcing it fails the request; left out, the completed grammar allows
// only end-of-generation tokens and the runtime re-samples it, and Compare
// checks it is the same one. Such a step is recognised as the last step of
// a row that stopped on "stop" with neither text nor bytes: llama-server
// renders special tokens as empty. The request must still ask for
// len(row.Output) tokens.
func ForcedTokens(row Row) (ids []int, endLeftOut bool, err error) {
	ids, ok := row.TokenIDs()
	if !ok {
		return nil, false, fmt.Errorf("row %q: a step has no token id; a forced replay needs ids (replay it on the runtime that recorded text only)", row.RowID)
	}
	if n := len(row.Output); n > 0 && row.StopReason == StopEOS {
		last := row.Output[n-1]
		if last.Text == "" && len(last.Bytes) == 0 {
			return ids[:n-1], true, nil
		}
	}
	return ids, false, nil
}

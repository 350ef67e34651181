package genrecord

import (
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

package fidelity

import (
	"fmt"
)

// Tokenized is a text as the reference's tokenizer cut it, with what the
// vocabulary says about a leading BOS token.
type Tokenized struct {
	IDs    []int
	AddBOS bool
	BOS    int
}

// Segment is one forward pass through both models: Tokens from position 0,
// of which those from Context on are scored (each predicted from all before
// it). Unit names what the bootstrap resamples: a task, or a chunk of a text.
type Segment struct {
	Unit    string
	Context int
	Tokens  []int
}

// Scored is how many tokens the segment scores.
func (s Segment) Scored() int { return len(s.Tokens) - s.Context }

// Chunks cuts a text as llama-perplexity --kl-divergence does, so the two
// measure the same tokens: whole chunks of nctx tokens (a remainder shorter
// than a chunk is dropped), each run from a fresh cache with its first token
// replaced by BOS where the vocabulary adds one, and only the second half
// scored: the logits at positions nctx/2 .. nctx-2, which predict tokens
// nctx/2+1 .. nctx-1, so every scored token has at least nctx/2 tokens of
// context. Each chunk is one bootstrap unit.
func Chunks(t Tokenized, nctx int) ([]Segment, error) {
	if nctx < 4 {
		return nil, fmt.Errorf("context %d: a chunk needs at least 4 tokens (use --ctx 128 or more)", nctx)
	}
	n := len(t.IDs) / nctx
	if n == 0 {
		return nil, fmt.Errorf("the text has %d tokens, fewer than one chunk of %d (use a longer text or a smaller --ctx)", len(t.IDs), nctx)
	}
	segs := make([]Segment, 0, n)
	for c := range n {
		toks := append([]int(nil), t.IDs[c*nctx:(c+1)*nctx]...)
		if t.AddBOS {
			toks[0] = t.BOS
		}
		segs = append(segs, Segment{Unit: fmt.Sprintf("chunk %d", c+1), Context: nctx/2 + 1, Tokens: toks})
	}
	return segs, nil
}

package fidelity

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"rig/genrecord"
	"rig/internal/gguf"
)

// Token types of a GGUF vocabulary (tokenizer.ggml.token_type) that
// llama.cpp parses out of a text as one token when it is told to parse
// special tokens, as llama-server does for a rendered prompt.
const (
	tokenTypeControl     = 3
	tokenTypeUserDefined = 4
)

// RowTokenizer turns a kept row that holds no token ids (an Ollama row: its
// API takes no ids and gives none) into a segment, by tokenizing the row's
// rendered prompt and kept text with the reference's own tokenizer through
// the scorer's tokenize mode. The prompt is tokenized as llama-server
// tokenizes a rendered prompt: the chat template's special tokens read as
// themselves (the text is cut at each, each piece tokenized on its own, as
// llama.cpp's tokenizer does when it parses specials) and BOS added where
// the vocabulary adds one; the kept text is tokenized as plain text. The
// ids are the reference tokenizer's reading of the texts, which can differ
// from the ids the runtime sampled where a text has more than one spelling
// in tokens; a study's records say which rows were read so (StudyRecord
// has no field for it: run/fidelity.go logs them).
type RowTokenizer struct {
	scorer   Scorer
	model    string
	specials []special // longest first
	cache    map[string][]int
	addBOS   bool
	bos      int
	// first holds the first byte of every special token: most bytes of a
	// text start none, and are passed over without trying each.
	first [256]bool
}

type special struct {
	text string
	id   int
}

// NewRowTokenizer reads model's special tokens from its GGUF header.
func NewRowTokenizer(s Scorer, model string) (*RowTokenizer, error) {
	f, err := gguf.Open(model)
	if err != nil {
		return nil, err
	}
	v, _ := f.Get(gguf.TokenizerPrefix + "tokens")
	tokens, ok := v.([]string)
	if !ok {
		return nil, fmt.Errorf("%s: the GGUF header has no %stokens list", model, gguf.TokenizerPrefix)
	}
	tv, _ := f.Get(gguf.TokenizerPrefix + "token_type")
	types, _ := tv.([]int32)
	t := &RowTokenizer{scorer: s, model: model, cache: map[string][]int{}}
	for i, typ := range types {
		if i < len(tokens) && (typ == tokenTypeControl || typ == tokenTypeUserDefined) && tokens[i] != "" {
			t.specials = append(t.specials, special{text: tokens[i], id: i})
			t.first[tokens[i][0]] = true
		}
	}
	sort.SliceStable(t.specials, func(i, j int) bool { return len(t.specials[i].text) > len(t.specials[j].text) })
	return t, nil
}

// Segment is row as a segment under unit: its rendered prompt as context,
// its kept text scored.
func (t *RowTokenizer) Segment(ctx context.Context, unit string, row genrecord.Row) (Segment, error) {
	if strings.TrimSpace(row.RenderedPrompt) == "" {
		return Segment{}, fmt.Errorf("%w: row %s keeps neither prompt token ids nor its rendered prompt, so its output cannot be scored in context", ErrUnscorableRow, row.RowID)
	}
	text := row.Text
	if text == "" {
		var b strings.Builder
		for _, s := range row.Output {
			b.WriteString(s.Text)
		}
		text = b.String()
	}
	if text == "" {
		return Segment{}, fmt.Errorf("%w: row %s keeps no output text, so nothing can be scored", ErrUnscorableRow, row.RowID)
	}
	var prompt []int
	for _, piece := range t.cut(row.RenderedPrompt) {
		if piece.id >= 0 {
			prompt = append(prompt, piece.id)
			continue
		}
		ids, err := t.plain(ctx, piece.text)
		if err != nil {
			return Segment{}, err
		}
		prompt = append(prompt, ids...)
	}
	// The output first: the tokenize mode's answer says whether the
	// vocabulary adds BOS.
	out, err := t.plain(ctx, text)
	if err != nil {
		return Segment{}, err
	}
	if t.addBOS && (len(prompt) == 0 || prompt[0] != t.bos) {
		prompt = append([]int{t.bos}, prompt...)
	}
	if len(prompt) == 0 || len(out) == 0 {
		return Segment{}, fmt.Errorf("%w: row %s: its prompt or its output tokenizes to nothing", ErrUnscorableRow, row.RowID)
	}
	return Segment{Unit: unit, Context: len(prompt), Tokens: append(prompt, out...)}, nil
}

// cut splits s at the vocabulary's special tokens, longest match first; a
// piece with id -1 is plain text.
func (t *RowTokenizer) cut(s string) []special {
	var out []special
	plainFrom := 0
	for i := 0; i < len(s); {
		hit := -1
		for k := 0; t.first[s[i]] && k < len(t.specials); k++ {
			if strings.HasPrefix(s[i:], t.specials[k].text) {
				hit = k
				break
			}
		}
		if hit < 0 {
			i++
			continue
		}
		if plainFrom < i {
			out = append(out, special{text: s[plainFrom:i], id: -1})
		}
		out = append(out, t.specials[hit])
		i += len(t.specials[hit].text)
		plainFrom = i
	}
	if plainFrom < len(s) {
		out = append(out, special{text: s[plainFrom:], id: -1})
	}
	return out
}

// plain tokenizes a piece of plain text, without the BOS the tokenize mode
// adds; each distinct piece is asked once (a chat template's pieces recur
// in every row).
func (t *RowTokenizer) plain(ctx context.Context, text string) ([]int, error) {
	if ids, ok := t.cache[text]; ok {
		return ids, nil
	}
	tk, err := t.scorer.tokenize(ctx, t.model, []byte(text))
	if err != nil {
		return nil, fmt.Errorf("tokenizing a kept row's text with %s: %w", t.model, err)
	}
	t.addBOS, t.bos = tk.AddBOS, tk.BOS
	ids := tk.IDs
	if tk.AddBOS && len(ids) > 0 && ids[0] == tk.BOS {
		ids = ids[1:]
	}
	t.cache[text] = ids
	return ids, nil
}

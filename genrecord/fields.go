package genrecord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ReasonField is a mismatch of a kept field with the kept tokens: the text
// people read and graders graded, or the prompt, is not what the tokens say.
// Re-scoring only looks at the tokens, so without this check an edited text
// over untouched tokens would replay as reproduced.
const ReasonField = "field"

// Field checks a replay runs on a row, as named in a Comparison's
// FieldChecks, so a summary says which applied to it.
const (
	CheckTextSteps    = "text = the kept steps' bytes"
	CheckTextIDs      = "text = detokenize(kept output ids)"
	CheckPromptTokens = "tokenize(rendered_prompt) = prompt_token_ids"
	// CheckTextPartial replaces CheckTextSteps on a row whose runtime sent
	// some tokens without a step (logprobs_missing_steps): their bytes are
	// not kept, so the text can only be shown to hold the kept steps' bytes
	// in order; an edit between them cannot be seen.
	CheckTextPartial = "text holds the kept steps' bytes in order (some tokens have no kept step)"
)

// ErrNoTokenizer is what a Tokenizer returns when its runtime's API cannot
// tokenize or detokenize (Ollama's has neither): the check does not apply,
// and the summary does not list it.
var ErrNoTokenizer = errors.New("the runtime's API offers no tokenizer")

// Tokenizer is the pinned runtime's tokenizer, offered by a Rescorer whose
// runtime exposes one (llama-server's /tokenize and /detokenize), so replay
// can check that a row's kept text and prompt are what its kept ids say.
// Tokenize must use the special-token handling the generation used.
type Tokenizer interface {
	Tokenize(ctx context.Context, text string) ([]int, error)
	Detokenize(ctx context.Context, ids []int) ([]byte, error)
}

// Spelled is what a row's kept steps spell: each step's bytes (its text
// where a step keeps no bytes), in order. A kept text must equal it.
func Spelled(row Row) []byte {
	var b bytes.Buffer
	for _, s := range row.Output {
		if len(s.Bytes) > 0 {
			b.Write(s.Bytes)
		} else {
			b.WriteString(s.Text)
		}
	}
	return b.Bytes()
}

// CheckFields checks the fields a row keeps beside its tokens against them:
// the text must be what the steps spell (no runtime needed), and, where tk
// can, what the kept output ids detokenize to, and the rendered prompt must
// tokenize to the kept prompt ids. It returns the checks that applied and
// the first field that failed, as a Mismatch naming it; err is for a
// tokenizer that failed to answer. The grade input of a row is its text
// (graders and regrades read Row.Text), so the text check covers it.
func CheckFields(ctx context.Context, row Row, tk Tokenizer) (checks []string, m *Mismatch, err error) {
	spelled := Spelled(row)
	// A row that keeps no text is read as its steps (Row.Text is optional),
	// so there is no second copy to disagree with them.
	partial := len(row.Output) < row.RuntimeTokenCount
	switch {
	case row.Text == "":
	case partial:
		checks = append(checks, CheckTextPartial)
		if m := textHoldsSteps(row); m != nil {
			return checks, m, nil
		}
	default:
		checks = append(checks, CheckTextSteps)
		if m := textMismatch("text", []byte(row.Text), spelled, "the kept tokens", row); m != nil {
			return checks, m, nil
		}
	}
	if tk == nil {
		return checks, nil, nil
	}
	if ids, _, ferr := ForcedTokens(row); ferr == nil && len(row.Output) > 0 && !partial {
		// The end-of-generation step is left out as in a forced replay:
		// the runtime keeps it with no text, while the tokenizer spells
		// special tokens ("<|im_end|>").
		detok, derr := tk.Detokenize(ctx, ids)
		switch {
		case errors.Is(derr, ErrNoTokenizer):
		case derr != nil:
			return checks, nil, fmt.Errorf("row %s: detokenizing its kept output ids: %w", row.RowID, derr)
		default:
			checks = append(checks, CheckTextIDs)
			field, what := "text", []byte(row.Text)
			if row.Text == "" {
				field, what = "output", spelled
			}
			if m := textMismatch(field, what, detok, "the detokenization of the kept output ids (the pinned tokenizer)", row); m != nil {
				return checks, m, nil
			}
		}
	}
	if len(row.PromptTokenIDs) > 0 {
		ids, terr := tk.Tokenize(ctx, row.RenderedPrompt)
		switch {
		case errors.Is(terr, ErrNoTokenizer):
		case terr != nil:
			return checks, nil, fmt.Errorf("row %s: tokenizing its rendered prompt: %w", row.RowID, terr)
		default:
			checks = append(checks, CheckPromptTokens)
			if m := promptMismatch(row.PromptTokenIDs, ids); m != nil {
				return checks, m, nil
			}
		}
	}
	return checks, nil, nil
}

// textHoldsSteps finds each kept step's bytes in the text, in order, and
// names the first step it cannot find.
func textHoldsSteps(row Row) *Mismatch {
	text := []byte(row.Text)
	at := 0
	for i, s := range row.Output {
		b := []byte(s.Bytes)
		if len(b) == 0 {
			b = []byte(s.Text)
		}
		if bytes.ContainsRune(b, utf8.RuneError) {
			// A token that holds part of a character, printed by the
			// runtime as U+FFFD (Ollama), with no bytes kept or with the
			// replacement's own bytes: the text holds the whole character,
			// never the replacement.
			continue
		}
		if len(b) == 0 || !utf8.Valid(b) {
			continue // a cut character is carried as U+FFFD in the text
		}
		j := bytes.Index(text[at:], b)
		if j < 0 {
			return &Mismatch{Step: i, Reason: ReasonField, Field: "text", Detail: fmt.Sprintf(
				"text does not hold the kept step %d's bytes %q after byte %d (%d of the %d generated tokens have a kept step)", i, b, at, len(row.Output), row.RuntimeTokenCount)}
		}
		at += j + len(b)
	}
	return nil
}

// textMismatch compares a kept field with what the tokens say and names the
// first differing byte, the step whose bytes hold it, and both sides there.
func textMismatch(field string, kept, want []byte, source string, row Row) *Mismatch {
	if bytes.Equal(kept, want) || lossyEqual(kept, want) {
		return nil
	}
	i := 0
	for i < len(kept) && i < len(want) && kept[i] == want[i] {
		i++
	}
	step := stepAtByte(row, i)
	lo := max(0, i-12)
	d := fmt.Sprintf("%s differs from %s at byte %d", field, source, i)
	if step >= 0 {
		d += fmt.Sprintf(" (step %d)", step)
	}
	d += fmt.Sprintf(": the %s has %q, the tokens say %q", field, window(kept, lo, i), window(want, lo, i))
	if len(kept) != len(want) {
		d += fmt.Sprintf(" (%d bytes against %d)", len(kept), len(want))
	}
	return &Mismatch{Step: step, Reason: ReasonField, Field: field, Detail: d}
}

// lossyEqual compares two spellings after both went through JSON text: a
// row cut by the token cap inside a character keeps bytes that are not UTF-8,
// and the runtime's JSON answer (the text, a detokenization) carries U+FFFD
// for them, one per byte or one per run depending on the encoder. Runs of
// invalid bytes and of U+FFFD are each read as one U+FFFD; any other byte
// must still match.
func lossyEqual(a, b []byte) bool {
	if utf8.Valid(a) && utf8.Valid(b) && !bytes.ContainsRune(a, utf8.RuneError) && !bytes.ContainsRune(b, utf8.RuneError) {
		return false
	}
	return bytes.Equal(collapseInvalid(a), collapseInvalid(b))
}

func collapseInvalid(b []byte) []byte {
	var out []byte
	bad := false
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError {
			if !bad {
				out = utf8.AppendRune(out, utf8.RuneError)
			}
			bad = true
		} else {
			out = append(out, b[:n]...)
			bad = false
		}
		b = b[n:]
	}
	return out
}

func window(b []byte, lo, at int) string {
	hi := min(len(b), at+12)
	if lo > len(b) {
		return ""
	}
	return string(b[lo:hi])
}

// stepAtByte is the step whose bytes hold byte i of what the steps spell,
// or -1 past their end.
func stepAtByte(row Row, i int) int {
	n := 0
	for j, s := range row.Output {
		l := len(s.Bytes)
		if l == 0 {
			l = len(s.Text)
		}
		if i < n+l {
			return j
		}
		n += l
	}
	return -1
}

func promptMismatch(kept, got []int) *Mismatch {
	i := 0
	for i < len(kept) && i < len(got) && kept[i] == got[i] {
		i++
	}
	if i == len(kept) && i == len(got) {
		return nil
	}
	d := fmt.Sprintf("rendered_prompt does not tokenize to the kept prompt_token_ids (the pinned tokenizer, special tokens parsed as at generation): they part at prompt token %d", i)
	switch {
	case i < len(kept) && i < len(got):
		d += fmt.Sprintf(", kept id %d, the rendered prompt gives %d", kept[i], got[i])
	default:
		d += fmt.Sprintf(" (%d kept ids, the rendered prompt gives %d)", len(kept), len(got))
	}
	return &Mismatch{Step: -1, Reason: ReasonField, Field: "rendered_prompt", Detail: d}
}

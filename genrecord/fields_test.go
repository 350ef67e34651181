package genrecord

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// vocabTokenizer is a stand-in for llama-server's tokenizer over the fake
// model's vocabulary: id n spells "t<n>", and each rendered prompt a row was
// made from tokenizes to the ids kept for it.
type vocabTokenizer struct {
	prompts map[string][]int
	calls   int
}

func (v *vocabTokenizer) Tokenize(_ context.Context, text string) ([]int, error) {
	v.calls++
	ids, ok := v.prompts[text]
	if !ok {
		return []int{9, 9, 9}, nil
	}
	return ids, nil
}

func (v *vocabTokenizer) Detokenize(_ context.Context, ids []int) ([]byte, error) {
	v.calls++
	var b bytes.Buffer
	for _, id := range ids {
		b.WriteString(tokText(id))
	}
	return b.Bytes(), nil
}

// noTokenizer is Ollama's side: its API can neither tokenize nor detokenize.
type noTokenizer struct{}

func (noTokenizer) Tokenize(context.Context, string) ([]int, error) { return nil, ErrNoTokenizer }
func (noTokenizer) Detokenize(context.Context, []int) ([]byte, error) {
	return nil, ErrNoTokenizer
}

// failingTokenizer is a runtime that is there but does not answer.
type failingTokenizer struct{}

func (failingTokenizer) Tokenize(context.Context, string) ([]int, error) {
	return nil, errors.New("llama-server /tokenize: connection refused")
}
func (failingTokenizer) Detokenize(context.Context, []int) ([]byte, error) {
	return nil, errors.New("llama-server /detokenize: connection refused")
}

// keptRow is a genuine row as a study keeps it: its text is what its steps
// spell, and its rendered prompt tokenizes to its prompt ids.
func keptRow(i int) (Row, *vocabTokenizer) {
	r := makeRow(fakeModel{salt: "smol", vocab: 40}, i, 8)
	r.Text = string(Spelled(r))
	return r, &vocabTokenizer{prompts: map[string][]int{r.RenderedPrompt: r.PromptTokenIDs}}
}

func TestCheckFieldsGenuineRowPassesEveryCheck(t *testing.T) {
	r, tk := keptRow(3)
	checks, m, err := CheckFields(context.Background(), r, tk)
	if err != nil || m != nil {
		t.Fatalf("a genuine row: mismatch %v, error %v", m, err)
	}
	want := []string{CheckTextSteps, CheckTextIDs, CheckPromptTokens}
	if !slices.Equal(checks, want) {
		t.Errorf("checks %q, want %q", checks, want)
	}
	if tk.calls != 2 {
		t.Errorf("tokenizer called %d times, want 2 (one detokenize, one tokenize)", tk.calls)
	}
}

func TestCheckFieldsTextEditNamesTheByte(t *testing.T) {
	r, tk := keptRow(4)
	// "t17t3…": change the first digit, as the reporter changed one digit
	// of an invoice number and left the tokens alone.
	at := strings.IndexAny(r.Text, "0123456789")
	b := []byte(r.Text)
	b[at] = '0' + (b[at]-'0'+1)%10
	r.Text = string(b)
	for _, tc := range []struct {
		name string
		tk   Tokenizer
	}{{"llama-server", tk}, {"ollama", noTokenizer{}}, {"no runtime", nil}} {
		_, m, err := CheckFields(context.Background(), r, tc.tk)
		if err != nil {
			t.Fatal(err)
		}
		if m == nil {
			t.Fatalf("%s: a text edit over untouched tokens passed the field checks", tc.name)
		}
		if m.Field != "text" || m.Reason != ReasonField || m.Step != stepAtByte(r, at) {
			t.Errorf("%s: mismatch %+v, want field text at step %d", tc.name, m, stepAtByte(r, at))
		}
		if s := m.String(); !strings.HasPrefix(s, "mismatch in text: text differs from the kept tokens at byte "+strconv.Itoa(at)) {
			t.Errorf("%s: message %q does not name the field and the byte", tc.name, s)
		}
	}
}

func TestCheckFieldsTruncatedText(t *testing.T) {
	r, tk := keptRow(5)
	r.Text = r.Text[:len(r.Text)-2]
	_, m, err := CheckFields(context.Background(), r, tk)
	if err != nil || m == nil || m.Field != "text" {
		t.Fatalf("a truncated text: mismatch %v, error %v; want a text mismatch", m, err)
	}
	if !strings.Contains(m.Detail, "bytes against") {
		t.Errorf("detail %q does not give both lengths", m.Detail)
	}
}

// A forger who edits the text and a step's bytes and text together, but not
// its id, passes the check against the steps; only the tokenizer shows that
// the id does not spell those bytes.
func TestCheckFieldsBytesThatTheIDDoesNotSpell(t *testing.T) {
	r, tk := keptRow(6)
	r.Output = slices.Clone(r.Output)
	st := r.Output[2]
	st.Text = "tX"
	st.Bytes = Bytes("tX")
	r.Output[2] = st
	r.Text = string(Spelled(r))
	checks, m, err := CheckFields(context.Background(), r, tk)
	if err != nil || m == nil {
		t.Fatalf("bytes the id does not spell: mismatch %v, error %v", m, err)
	}
	if m.Field != "text" || !strings.Contains(m.Detail, "detokenization of the kept output ids") || m.Step != 2 {
		t.Errorf("mismatch %+v, want text against the detokenization at step 2", m)
	}
	if !slices.Equal(checks, []string{CheckTextSteps, CheckTextIDs}) {
		t.Errorf("checks %q", checks)
	}
	// Without a tokenizer (Ollama) the same row passes: its steps keep no
	// ids, and the forced re-scoring is what is left to catch it.
	if _, m, _ := CheckFields(context.Background(), r, noTokenizer{}); m != nil {
		t.Errorf("without a tokenizer the row should pass the field checks, got %v", m)
	}
}

func TestCheckFieldsPromptEdit(t *testing.T) {
	r, tk := keptRow(7)
	r.RenderedPrompt = strings.Replace(r.RenderedPrompt, "item", "itex", 1)
	_, m, err := CheckFields(context.Background(), r, tk)
	if err != nil || m == nil {
		t.Fatalf("a prompt edit: mismatch %v, error %v", m, err)
	}
	if m.Field != "rendered_prompt" || m.Step != -1 || !strings.Contains(m.Detail, "prompt_token_ids") {
		t.Errorf("mismatch %+v, want rendered_prompt against prompt_token_ids", m)
	}
	if !strings.HasPrefix(m.String(), "mismatch in rendered_prompt: ") {
		t.Errorf("message %q does not name the field", m.String())
	}
}

func TestCheckFieldsEndOfGenerationIsNotDetokenized(t *testing.T) {
	r, tk := keptRow(8)
	eog := 39
	lp := -0.5
	r.Output = append(slices.Clone(r.Output), Step{ID: &eog, Logprob: &lp, Top: r.Output[0].Top})
	r.StopReason, r.RuntimeTokenCount = StopEOS, len(r.Output)
	if _, m, err := CheckFields(context.Background(), r, tk); err != nil || m != nil {
		t.Fatalf("a row ending in end-of-generation (no text): mismatch %v, error %v", m, err)
	}
}

func TestCheckFieldsCutCharacter(t *testing.T) {
	// A row cut by the token cap inside "€" (e2 82 ac) keeps two bytes that
	// are not UTF-8; the runtime's JSON text carries U+FFFD for them.
	r, tk := keptRow(9)
	r.Output = slices.Clone(r.Output)
	last := r.Output[len(r.Output)-1]
	last.Bytes = Bytes("\xe2\x82")
	last.Text = ""
	r.Output[len(r.Output)-1] = last
	spelled := Spelled(r)
	r.Text = string(spelled[:len(spelled)-2]) + "\uFFFD"
	tk.prompts[r.RenderedPrompt] = r.PromptTokenIDs
	if _, m, _ := CheckFields(context.Background(), r, nil); m != nil {
		t.Errorf("a cut character read back as U+FFFD: %v", m)
	}
	// Any other byte must still match.
	r.Text = "x" + r.Text[1:]
	if _, m, _ := CheckFields(context.Background(), r, nil); m == nil || m.Field != "text" {
		t.Errorf("an edit beside a cut character passed: %v", m)
	}
}

func TestCheckFieldsTokenizerErrorIsAnError(t *testing.T) {
	r, _ := keptRow(10)
	if _, _, err := CheckFields(context.Background(), r, failingTokenizer{}); err == nil || !strings.Contains(err.Error(), r.RowID) {
		t.Fatalf("a tokenizer that does not answer: error %v, want one naming the row", err)
	}
}

// tokenizingRescorer is llama-server's rescorer: it forces the kept tokens
// and offers the pinned tokenizer.
type tokenizingRescorer struct {
	fakeRescorer
	*vocabTokenizer
}

// TestReplayTextEditIsAMismatch is the reported defect: a row whose text was
// edited while its tokens were left alone replayed as reproduced with max
// |Δ| 0. It must be a mismatch naming the text, and count as changed for
// calibration.
func TestReplayTextEditIsAMismatch(t *testing.T) {
	var rows []Row
	tk := &vocabTokenizer{prompts: map[string][]int{}}
	for i := range 4 {
		r, one := keptRow(20 + i)
		rows = append(rows, r)
		for p, ids := range one.prompts {
			tk.prompts[p] = ids
		}
	}
	rows[2].Text = strings.Replace(rows[2].Text, "t", "T", 1)
	path := recordWith(t, rows)
	rs := &tokenizingRescorer{fakeRescorer{model: fakeModel{salt: "smol", vocab: 40}, pins: testPins()}, tk}
	sum, err := Replay(context.Background(), path, rs, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != StatusMismatch || sum.Mismatched != 1 || sum.Reproduced != 3 {
		t.Fatalf("status %s, %d mismatched, %d reproduced; want one mismatch", sum.Status, sum.Mismatched, sum.Reproduced)
	}
	r := sum.Results[2]
	if r.Status != StatusMismatch || r.Comparison.First == nil || r.Comparison.First.Field != "text" {
		t.Fatalf("row %s: %s %+v, want a mismatch in text", r.RowID, r.Status, r.Comparison.First)
	}
	if r.Comparison.MaxAbsDiff != 0 {
		t.Errorf("the tokens were untouched, yet max |Δ| is %g", r.Comparison.MaxAbsDiff)
	}
	if d := r.Comparison.Distance("x"); !d.Changed || !(Tolerance{Token: 10, Row: 10}).Catches(d) {
		t.Errorf("a field mismatch must be caught whatever the tolerance: %+v", d)
	}
	if got := sum.Results[0].Comparison.FieldChecks; len(got) != 3 {
		t.Errorf("a genuine row on a stack with a tokenizer ran checks %q, want all three", got)
	}
	var b strings.Builder
	if err := sum.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "mismatch in text: text differs from the kept tokens at byte 0") {
		t.Errorf("summary does not name the field:\n%s", b.String())
	}
}

// A row whose runtime sent some tokens without log-probs keeps no step for
// them: the text is checked to hold the kept steps in order, and says so.
func TestCheckFieldsRowWithGaps(t *testing.T) {
	r, tk := keptRow(11)
	r.Text = "<" + r.Text[:6] + "gap" + r.Text[6:] + ">"
	r.RuntimeTokenCount, r.LogprobsMissingSteps = len(r.Output)+3, 3
	checks, m, err := CheckFields(context.Background(), r, tk)
	if err != nil || m != nil {
		t.Fatalf("a genuine row with gaps: mismatch %v, error %v", m, err)
	}
	if !slices.Equal(checks, []string{CheckTextPartial, CheckPromptTokens}) {
		t.Errorf("checks %q, want the partial text check and the prompt check", checks)
	}
	r.Text = strings.Replace(r.Text, tokText(*r.Output[3].ID), "tZ", 1)
	if _, m, _ := CheckFields(context.Background(), r, tk); m == nil || m.Field != "text" || !strings.Contains(m.Detail, "does not hold the kept step") {
		t.Errorf("an edit of a kept step's bytes in a row with gaps passed: %v", m)
	}
}

// A token that holds part of a character is printed by Ollama as U+FFFD,
// with no bytes kept, while the row's text has the whole character: the
// text is not held to the replacement (the demo's replay of an Ollama row
// whose output began with such a token was called a mismatch). A kept
// step that is really missing from the text still is.
func TestCheckFieldsPartialCharacterStep(t *testing.T) {
	r, tk := keptRow(12)
	first := tokText(*r.Output[0].ID)
	r.Text = "<" + strings.Replace(r.Text, first, "—", 1) + ">"
	r.Output[0].Text, r.Output[0].Bytes = "\ufffd\ufffd", nil
	r.RuntimeTokenCount, r.LogprobsMissingSteps = len(r.Output)+2, 2
	if _, m, err := CheckFields(context.Background(), r, tk); err != nil || m != nil {
		t.Fatalf("a row whose first token is part of a character: mismatch %v, error %v", m, err)
	}
	// The same token with the replacement's own bytes kept as its bytes
	// (a second CI failure, the same message with the bytes "��").
	r.Output[0].Bytes = []byte("\ufffd\ufffd")
	if _, m, err := CheckFields(context.Background(), r, tk); err != nil || m != nil {
		t.Fatalf("a row whose first token is part of a character, its bytes the replacement's: mismatch %v, error %v", m, err)
	}
	r.Text = strings.Replace(r.Text, tokText(*r.Output[2].ID), "tZ", 1)
	if _, m, _ := CheckFields(context.Background(), r, tk); m == nil || !strings.Contains(m.Detail, "does not hold the kept step") {
		t.Errorf("an edit of a kept step's bytes after a partial character passed: %v", m)
	}
}

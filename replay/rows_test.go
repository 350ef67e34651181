package replay

import (
	"testing"

	"rig/genrecord"
)

func ip(v int) *int         { return &v }
func fp(v float64) *float64 { return &v }

// fakeRow is a hand-made row in llama-server's shape: ids on every token,
// the last step an end-of-generation token with no text.
func fakeRow() genrecord.Row {
	step := func(id int, text string, lp float64, alts ...genrecord.Alt) genrecord.Step {
		return genrecord.Step{ID: ip(id), Text: text, Logprob: fp(lp), Top: alts}
	}
	alt := func(id int, text string, lp float64) genrecord.Alt {
		return genrecord.Alt{ID: ip(id), Text: text, Logprob: lp}
	}
	return genrecord.Row{Kind: genrecord.KindRow, RowID: "r", K: 2, StopReason: genrecord.StopEOS, Text: "ab",
		Output: []genrecord.Step{
			step(1, "a", -0.1, alt(1, "a", -0.1), alt(2, "x", -2.5)),
			step(3, "b", -0.2, alt(3, "b", -0.2), alt(0, "", -1.9)), // runner-up is end-of-generation
			step(0, "", -0.3, alt(0, "", -0.3), alt(4, "c", -1.5)),
		}}
}

func TestEditOneToken(t *testing.T) {
	row := fakeRow()
	e, step, ok := editOneToken(row, 0)
	if !ok || step != 0 {
		t.Fatalf("edit: ok %v at step %d, want step 0 (the only step with a runner-up that has text)", ok, step)
	}
	if *e.Output[0].ID != 2 || e.Output[0].Text != "x" || e.Text != "xb" {
		t.Errorf("edited step 0 = id %d %q, text %q; want the runner-up id 2 \"x\", text \"xb\"", *e.Output[0].ID, e.Output[0].Text, e.Text)
	}
	if *e.Output[0].Logprob != -0.1 {
		t.Errorf("log-prob changed to %g; an edit of the kept text leaves the recorded numbers", *e.Output[0].Logprob)
	}
	if *row.Output[0].ID != 1 || row.Text != "ab" {
		t.Errorf("the original row was modified: id %d, text %q", *row.Output[0].ID, row.Text)
	}
	f, step, ok := forgeOneToken(row, 0)
	if !ok || step != 0 || *f.Output[0].Logprob != -2.5 || *f.Output[0].ID != 2 {
		t.Errorf("forged edit: ok %v step %d id %d log-prob %g; want the runner-up id 2 with its recorded -2.5", ok, step, *f.Output[0].ID, *f.Output[0].Logprob)
	}
	if *row.Output[0].Logprob != -0.1 {
		t.Errorf("forging modified the original row's log-prob: %g", *row.Output[0].Logprob)
	}
	// pick wraps over the editable steps.
	if _, step, _ := editOneToken(row, 5); step != 0 {
		t.Errorf("pick 5 edited step %d, want 0", step)
	}
	row.Output = row.Output[1:]
	if _, _, ok := editOneToken(row, 0); ok {
		t.Errorf("a row whose only runner-ups are end-of-generation tokens was edited")
	}
}

func TestEditText(t *testing.T) {
	row := fakeRow()
	row.Text = "invoice 4417, due"
	e, at, ok := editText(row, 1)
	if !ok || at != 9 || e.Text != "invoice 4517, due" {
		t.Fatalf("edit: ok %v at %d, text %q; want the second digit changed (\"invoice 4517, due\")", ok, at, e.Text)
	}
	if row.Text != "invoice 4417, due" || *e.Output[0].ID != *row.Output[0].ID {
		t.Errorf("the original row or the tokens changed: %q, id %d", row.Text, *e.Output[0].ID)
	}
	// Without digits a letter changes; with neither nothing can be edited.
	row.Text = "ab"
	if e, _, ok := editText(row, 1); !ok || e.Text != "ac" {
		t.Errorf("letter edit: ok %v text %q, want \"ac\"", ok, e.Text)
	}
	row.Text = "?!"
	if _, _, ok := editText(row, 0); ok {
		t.Errorf("a text with no digit or letter was edited")
	}
	// The edit is one the field checks catch with no runtime at all.
	row.Text = "ab"
	e, _, _ = editText(row, 0)
	if _, m, err := genrecord.CheckFields(t.Context(), e, nil); err != nil || m == nil || m.Field != "text" {
		t.Errorf("a text-only edit passed the field checks: %v %v", m, err)
	}
	if _, m, _ := genrecord.CheckFields(t.Context(), row, nil); m != nil {
		t.Errorf("the unedited row failed the field checks: %v", m)
	}
}

func TestEditPrompt(t *testing.T) {
	row := fakeRow()
	row.RenderedPrompt = "<|im_start|>user\nWhat is tea?<|im_end|>\n<|im_start|>assistant\n"
	row.PromptTokenIDs = []int{1, 2, 3}
	e, at, ok := editPrompt(row, "What is tea?", 0)
	if !ok || at != len("<|im_start|>user\n") || e.RenderedPrompt[:len("<|im_start|>user\nXhat")] != "<|im_start|>user\nXhat" {
		t.Fatalf("edit: ok %v at %d, prompt %q; want the message's first letter changed", ok, at, e.RenderedPrompt)
	}
	if len(e.PromptTokenIDs) != 3 || e.Text != row.Text {
		t.Errorf("the edit touched more than the rendered prompt: %+v", e)
	}
	if _, _, ok := editPrompt(row, "not in the prompt", 0); ok {
		t.Errorf("a message the rendered prompt does not hold was edited")
	}
}

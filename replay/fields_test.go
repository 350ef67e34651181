package replay

import (
	"context"
	"slices"
	"strings"
	"testing"

	"rig/genrecord"
)

// TestReplayCatchesTextOnlyEdit is the case on the real runtime: a
// SmolLM2 row recorded on llama-server replays as reproduced, with every
// field check applying; the same row with one digit of its text changed and
// its tokens left alone is a mismatch naming the text; with one letter of
// its rendered prompt changed, one naming the rendered prompt.
func TestReplayCatchesTextOnlyEdit(t *testing.T) {
	in := replayProvisioned(t)
	ctx := context.Background()
	work := t.TempDir()
	stack, err := startReplayStack(ctx, in, "llama-server", goalModel, work, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.stop()
	live, err := stack.generateRows(ctx, "inv", 2, 24, "Write an invoice line for %s with its number and price.")
	if err != nil {
		t.Fatal(err)
	}
	row := live[0].row
	set := replaySet{work: work}
	rec, err := set.record("genuine.jsonl", stack.header.Pins, rowsOf(live))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := genrecord.Replay(ctx, rec, stack.rescorer(), genrecord.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != genrecord.StatusReproduced || sum.Reproduced != 2 {
		t.Fatalf("genuine rows: %s, %d of 2 reproduced: %+v", sum.Status, sum.Reproduced, sum.Results)
	}
	want := []string{genrecord.CheckTextSteps, genrecord.CheckTextIDs, genrecord.CheckPromptTokens}
	for _, r := range sum.Results {
		if !slices.Equal(r.Comparison.FieldChecks, want) {
			t.Errorf("row %s ran field checks %q, want %q on llama-server", r.RowID, r.Comparison.FieldChecks, want)
		}
	}

	edited, at, ok := editText(row, 0)
	if !ok {
		t.Fatalf("the row's text %q has no digit or letter to edit", row.Text)
	}
	t.Logf("text %q: byte %d %q -> %q", row.Text, at, row.Text[at], edited.Text[at])
	prompt, _, ok := editPrompt(row, lastContent(live[0].messages), 2)
	if !ok {
		t.Fatalf("the rendered prompt %q does not hold the message", row.RenderedPrompt)
	}
	prompt.RowID = row.RowID + "-prompt"
	recE, err := set.record("edited.jsonl", stack.header.Pins, []genrecord.Row{edited, prompt})
	if err != nil {
		t.Fatal(err)
	}
	sum, err = genrecord.Replay(ctx, recE, stack.rescorer(), genrecord.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := sum.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("replay of the edited rows:\n%s", b.String())
	if sum.Status != genrecord.StatusMismatch || sum.Mismatched != 2 {
		t.Fatalf("edited rows: %s, %d of 2 mismatched", sum.Status, sum.Mismatched)
	}
	for i, field := range []string{"text", "rendered_prompt"} {
		r := sum.Results[i]
		if m := r.Comparison.First; m == nil || m.Field != field || !strings.HasPrefix(m.String(), "mismatch in "+field+": ") {
			t.Errorf("row %s: %+v, want a mismatch naming %s", r.RowID, m, field)
		}
		if r.Comparison.MaxAbsDiff != 0 {
			t.Errorf("row %s: the tokens were untouched, yet max |Δ| is %g", r.RowID, r.Comparison.MaxAbsDiff)
		}
	}
	if !strings.Contains(b.String(), "mismatch in text: text differs from the kept tokens at byte ") {
		t.Errorf("the summary does not say where the text differs:\n%s", b.String())
	}
}

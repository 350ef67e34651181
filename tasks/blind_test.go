package tasks

import (
	"errors"
	"strings"
	"testing"
)

func blindOutputs() []Output {
	return []Output{
		{TrialID: "r1", TaskID: "t1", Arm: "challenger-a", Model: "smollm2:135m", Text: "As SmolLM2, I think the answer is 4."},
		{TrialID: "r2", TaskID: "t1", Arm: "incumbent", Model: "hf.co/google/gemma-3-270m", Text: "I am Gemma-3-270M (a Gemma model). The answer is four."},
		{TrialID: "r3", TaskID: "t1", Arm: "challenger-b", Model: "qwen2.5:0.5b", Text: "4"},
	}
}

func TestBlind(t *testing.T) {
	outs := blindOutputs()
	items, m := Blind(outs, 7, "registry:model-0042")
	if len(items) != len(outs) || len(m.Entries) != len(outs) {
		t.Fatalf("%d items, %d entries", len(items), len(m.Entries))
	}
	ids := []string{"smollm2:135m", "hf.co/google/gemma-3-270m", "qwen2.5:0.5b", "challenger-a", "incumbent", "challenger-b"}
	labels := map[string]bool{}
	for _, it := range items {
		if labels[it.Label] {
			t.Errorf("label %s repeated", it.Label)
		}
		labels[it.Label] = true
		if err := AssertNoIdentity(it.Text+" "+it.Label, append(ids, "gemma", "smollm", "qwen")); err != nil {
			t.Errorf("item %s still names its source: %v (%q)", it.Label, err, it.Text)
		}
		e, ok := m.Lookup(it.Label)
		if !ok || e.TaskID != it.TaskID {
			t.Errorf("label %s does not join back", it.Label)
		}
	}
	// The map joins labels to the right trials.
	for _, it := range items {
		e, _ := m.Lookup(it.Label)
		if e.TrialID == "r3" && it.Text != "4" {
			t.Errorf("label of r3 joined to text %q", it.Text)
		}
	}
	// Same seed, same labels; another seed, other labels.
	again, _ := Blind(outs, 7)
	other, _ := Blind(outs, 8)
	if again[0].Label != items[0].Label {
		t.Error("labels not reproducible from the seed")
	}
	if other[0].Label == items[0].Label && other[1].Label == items[1].Label {
		t.Error("labels do not depend on the seed")
	}
}

func TestJudgePromptBlind(t *testing.T) {
	outs := blindOutputs()
	items, m := Blind(outs, 1)
	prompt := JudgePrompt("Score each output for correctness.", "What is 2+2?", items)
	if err := AssertNoIdentity(prompt, m.Identities()); err != nil {
		t.Errorf("judge prompt names a model: %v\n%s", err, prompt)
	}
	for _, it := range items {
		if !strings.Contains(prompt, it.Label) {
			t.Errorf("prompt lacks label %s", it.Label)
		}
	}
	// An unredacted prompt is caught, whatever the case.
	raw := JudgePrompt("x", "y", []BlindItem{{Label: "item-1", Text: outs[0].Text}})
	err := AssertNoIdentity(raw, []string{"smollm2:135m"})
	var ie *IdentityError
	if !errors.As(err, &ie) || !errors.Is(err, ErrIdentity) || ie.Identity != "smollm2" {
		t.Errorf("AssertNoIdentity = %v, want the short name smollm2", err)
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ text, want string }{
		{"I am SMOLLM2:135M here", "I am [redacted] here"},
		{"gemma-3-270m.gguf loaded", "[redacted] loaded"},
		{"nothing to see", "nothing to see"},
	}
	for _, tc := range tests {
		if got := Redact(tc.text, []string{"smollm2:135m", "models/gemma-3-270m.gguf"}); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

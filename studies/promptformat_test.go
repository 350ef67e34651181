package studies

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/gguf"
)

func TestPromptFormatField(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(d *Design)
		path string
		msg  string
	}{
		{"unknown format", func(d *Design) { d.Arms[1].PromptFormat = "raw" }, "arms[1].prompt_format", `"raw": write "chat"`},
		{"aider takes chat only", func(d *Design) { d.Arms[4].PromptFormat = PromptCompletion }, "arms[4].prompt_format", "Aider sends chat requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := demoDesign(t)
			tc.edit(d)
			err := Validate(context.Background(), d, ValidateOptions{})
			var ve *ValidationError
			if !errors.As(err, &ve) || !ve.Has(KindInvalid, tc.path) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Validate = %v, want %s at %s", err, tc.msg, tc.path)
			}
		})
	}
	d := demoDesign(t)
	if d.Arms[0].Format() != PromptChat {
		t.Errorf("an arm with no prompt_format is %q, want chat", d.Arms[0].Format())
	}
	before, _ := DesignHash(d)
	d.Arms[1].PromptFormat = PromptCompletion
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Errorf("a llama-server arm in completion format: %v", err)
	}
	if after, _ := DesignHash(d); after == before {
		t.Error("the prompt format does not change the design hash")
	}
}

func TestInstructFromMetadata(t *testing.T) {
	for _, tc := range []struct {
		m    ModelFormat
		want bool
	}{
		{ModelFormat{ChatTemplate: true, Name: "Anything"}, true},
		{ModelFormat{Name: "SmolLM2 135M Instruct"}, true},
		{ModelFormat{Name: "Gemma 3 270m", Finetune: "it"}, true},
		{ModelFormat{Name: "gemma-3-270m-it"}, true},
		{ModelFormat{Name: "Some Model", Tags: []string{"chat"}}, true},
		{ModelFormat{Name: "Gemma 3 270m"}, false},
		{ModelFormat{Name: "Gemma 3 270m", Tags: []string{"text-generation", "gemma3"}}, false},
		{ModelFormat{Name: "Italian 1B"}, false}, // "it" is a word, not a substring
	} {
		if got := tc.m.Instruct(); got != tc.want {
			t.Errorf("%+v: Instruct = %v, want %v", tc.m, got, tc.want)
		}
	}
}

// The check reads real GGUF headers: a file with no chat template and no
// instruct tag in chat format is refused naming the model and both ways on;
// the same file in completion format, or a file with its own template,
// passes; Aider's arm is told to use an instruction-tuned file.
func TestBaseModelRefusedInChat(t *testing.T) {
	dir := t.TempDir()
	chat, base := filepath.Join(dir, "chat.gguf"), filepath.Join(dir, "base.gguf")
	if err := gguf.WriteTiny(chat, gguf.TinyOptions{Seed: 1, ChatTemplate: "{% for m in messages %}{{ m['content'] }}{% endfor %}"}); err != nil {
		t.Fatal(err)
	}
	if err := gguf.WriteTiny(base, gguf.TinyOptions{Seed: 2}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SMOLLM2_GGUF": chat, "SMOLLM2_REQUANT_Q8_0_GGUF": base}
	opts := ValidateOptions{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Format: GGUFFormat}

	d := demoDesign(t)
	err := Validate(context.Background(), d, opts)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v, want base-model refusals", err)
	}
	for i, a := range d.Arms {
		want := a.Model.File == "${SMOLLM2_REQUANT_Q8_0_GGUF}"
		if got := ve.Has(KindBaseModel, armIndexPath(i)); got != want {
			t.Errorf("arms[%d] (%s, %s): refused %v, want %v", i, a.Name, a.Model.File, got, want)
		}
	}
	for _, want := range []string{`model "SmolLM2-135M-Instruct-Q8_0"`, base, `general.name "rig-tiny-seed-2"`, "no tokenizer.chat_template and no instruct tag",
		`"prompt_format": "completion"`, "few-shot prefix", "instruction-tuned GGUF", "Aider speaks only chat"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %s:\n%v", want, err)
		}
	}

	// Completion on the base model's direct arms; Aider's arm moves to the
	// instruction-tuned file.
	for i := range d.Arms {
		if d.Arms[i].Model.File != "${SMOLLM2_REQUANT_Q8_0_GGUF}" {
			continue
		}
		if d.Arms[i].Runtime.Aider() {
			d.Arms[i].Model.File = "${SMOLLM2_GGUF}"
		} else {
			d.Arms[i].PromptFormat = PromptCompletion
		}
	}
	if err := Validate(context.Background(), d, opts); err != nil {
		t.Errorf("completion on the base model, chat on the instruct one: %v", err)
	}
}

func armIndexPath(i int) string { return fmt.Sprintf("arms[%d].model.file", i) }

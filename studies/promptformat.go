package studies

import (
	"context"
	"fmt"
	"os"
	"strings"
	"unicode"
)

// Prompt formats an arm may declare: how a task's prompt reaches the model.
const (
	// PromptChat sends the prompt as one user turn, rendered by the model's
	// chat template (the default).
	PromptChat = "chat"
	// PromptCompletion sends the bank's few-shot prefix, the prompt and the
	// bank's answer cue as plain text with no template: the format of a
	// pretrained base model, which was never trained on a chat template.
	PromptCompletion = "completion"
)

// Format is the arm's prompt format with the default applied.
func (a *Arm) Format() string {
	if a.PromptFormat == "" {
		return PromptChat
	}
	return a.PromptFormat
}

// ModelFormat is what a model file's metadata says about the prompts it
// was trained on, read by a FormatReader.
type ModelFormat struct {
	// ChatTemplate is true when the file carries tokenizer.chat_template.
	ChatTemplate bool
	Name         string   // general.name
	Type         string   // general.type: "model", or "adapter" for a LoRA
	Finetune     string   // general.finetune, e.g. "Instruct" or "it"
	Tags         []string // general.tags
}

// instructWords are the words of a name, finetune label or tag that mark
// weights tuned to follow turns: "SmolLM2 135M Instruct", "gemma-3-270m-it".
var instructWords = map[string]bool{"instruct": true, "it": true, "chat": true, "sft": true, "dpo": true, "rlhf": true, "assistant": true}

// Instruct reports whether the metadata marks the weights as tuned to follow
// instructions: a chat template of their own, or an instruct word in
// general.finetune, general.name or general.tags.
func (m ModelFormat) Instruct() bool {
	if m.ChatTemplate {
		return true
	}
	texts := append([]string{m.Finetune, m.Name}, m.Tags...)
	for _, s := range texts {
		for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			if instructWords[w] {
				return true
			}
		}
	}
	return false
}

// describe names the model by what its metadata says, for a message.
func (m ModelFormat) describe() string {
	var parts []string
	if m.Name != "" {
		parts = append(parts, fmt.Sprintf("general.name %q", m.Name))
	}
	if m.Finetune != "" {
		parts = append(parts, fmt.Sprintf("general.finetune %q", m.Finetune))
	} else {
		parts = append(parts, "no general.finetune")
	}
	if len(m.Tags) > 0 {
		parts = append(parts, fmt.Sprintf("general.tags %q", m.Tags))
	}
	return strings.Join(parts, ", ")
}

// FormatReader reads a model file's ModelFormat; GGUFFormat is the one
// register and freeze use.
type FormatReader func(path string) (ModelFormat, error)

// GGUFFormat reads a ModelFormat from a GGUF header.
func GGUFFormat(path string) (ModelFormat, error) { return GGUFFormatWith(os.Open)(path) }

// GGUFFormatWith is GGUFFormat opening the file with open (see
// GGUFQuantWith).
func GGUFFormatWith(open func(string) (*os.File, error)) FormatReader {
	return func(path string) (ModelFormat, error) { return ggufFormat(open, path) }
}

func ggufFormat(open func(string) (*os.File, error), path string) (ModelFormat, error) {
	f, err := ggufHeader(open, path)
	if err != nil {
		return ModelFormat{}, err
	}
	var m ModelFormat
	t, _ := f.String("tokenizer.chat_template")
	m.ChatTemplate = strings.TrimSpace(t) != ""
	m.Name, _ = f.String("general.name")
	m.Type, _ = f.String("general.type")
	m.Finetune, _ = f.String("general.finetune")
	if v, ok := f.Get("general.tags"); ok {
		if tags, ok := v.([]string); ok {
			m.Tags = tags
		}
	}
	return m, nil
}

// promptFormats checks what the design alone can say about each arm's
// prompt format.
func (v *validator) promptFormats() {
	for i, a := range v.d.Arms {
		p := v.armPath(i) + ".prompt_format"
		switch a.PromptFormat {
		case "", PromptChat:
		case PromptCompletion:
			if a.Runtime.Aider() {
				v.add(KindInvalid, p, "%q: Aider sends chat requests of its own making, so an arm run through it takes chat turns (remove prompt_format, and point model.file at an instruction-tuned model)", a.PromptFormat)
			}
			if a.Role == RoleJudge {
				v.add(KindInvalid, p, "%q: a judge is asked for a grade in chat turns (remove prompt_format, and use an instruction-tuned model as the judge)", a.PromptFormat)
			}
		default:
			v.add(KindInvalid, p, "%q: write %q (the model's chat template renders the prompt; the default) or %q (plain text with the bank's few-shot prefix, for a base model)", a.PromptFormat, PromptChat, PromptCompletion)
		}
	}
}

// baseModels refuses an arm that would put a chat template on a model that
// carries none and was never tuned to follow turns: a pretrained base model
// given chat turns repeats the prompt and rambles, and the comparison
// measures the mismatch, not the model.
func (v *validator) baseModels(ctx context.Context, opts ValidateOptions) {
	seen := map[string]bool{} // a card sub-study's cells of one arm say it once
	for i, a := range v.d.Arms {
		if ctx.Err() != nil {
			return
		}
		if a.Model.File == "" || a.Format() != PromptChat || seen[v.armPath(i)] {
			continue
		}
		seen[v.armPath(i)] = true
		path, err := ModelPath(a.Model.File, opts.Lookup, opts.BaseDir)
		if err != nil {
			continue // the quant check, or freeze, names an unset reference
		}
		m, err := opts.Format(path)
		if err != nil {
			v.add(KindUnreadable, v.armPath(i)+".model.file", "cannot read the GGUF metadata of %s: %v (check the path)", path, err)
			continue
		}
		if m.Type == "adapter" {
			v.add(KindInvalid, v.armPath(i)+".model.file", "%s is a LoRA adapter (general.type \"adapter\"), not a model rig can load on its own (point model.file at the merged model's GGUF)", path)
			continue
		}
		if m.Instruct() {
			continue
		}
		how := "a chat template"
		if a.Runtime.Aider() {
			how = "chat turns (Aider's)"
		}
		fix := fmt.Sprintf("declare the arm's \"prompt_format\": %q, which sends the task bank's few-shot prefix and the prompt as plain text (the bank's header needs a completion block; docs/tasks.md), or point model.file at an instruction-tuned GGUF", PromptCompletion)
		if a.Runtime.Aider() {
			fix = "point model.file at an instruction-tuned GGUF (Aider speaks only chat)"
		}
		v.add(KindBaseModel, v.armPath(i)+".model.file",
			"model %q (%s; %s) is a pretrained base model: its GGUF carries no tokenizer.chat_template and no instruct tag, so %s would be applied to a model never trained on one, and it answers with the prompt repeated and off-task text. To go on, %s",
			a.Model.RegistryName, path, m.describe(), how, fix)
	}
}
